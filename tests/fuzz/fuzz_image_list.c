/* Fuzz target: an image folder's list file (data/images.c), "FILE LABEL" lines read
 * as a training list, relative to a folder that holds no images: only the list's
 * parsing and checks run, never a decode. */
#include "tests/fuzz/fuzz.h"

#include "data/data.h"

FUZZ_ENTRY(image_list)
{
    char list[FUZZ_PATH_MAX], dir[FUZZ_PATH_MAX];
    fuzz_write(list, "image_list/train.txt", data, size);
    dataset *d = NULL;
    if (images_open(fuzz_path(dir, "image_list"), list, 3, 8, 8, &d) == VDNN_OK) dataset_free(d);
    return 0;
}
