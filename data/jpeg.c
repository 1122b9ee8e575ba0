/* JPEG decoding with libjpeg-turbo (libjpeg's API): a file held in memory becomes 8-bit
 * gray or RGB, optionally reduced by libjpeg's DCT scaling, with the EXIF orientation
 * read from its APP1 marker.
 *
 * Gray, YCbCr/RGB and CMYK/YCCK files are read. CMYK comes out as libjpeg stores it;
 * Adobe's files (the ones with an Adobe marker, as Photoshop writes) store it inverted,
 * and the conversion to RGB takes that into account: R = C * K / 255 on the stored
 * values, (255 - C) * (255 - K) / 255 on plain ones. libjpeg's errors land in our own
 * handler, which longjmps back; its warnings (a truncated file, corrupt entropy-coded
 * data) fail the decode too, except for extraneous bytes before a marker, which many
 * cameras write and which damage nothing. Nothing reaches stderr. */
#include "data/data_impl.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

/* A decoded image is refused beyond this many bytes, and a file that declares more
 * pixels than JPEG_MAX_PIXELS (a hostile header can declare 65535 x 65535 in a few
 * bytes); libjpeg's own buffers (a progressive file's coefficients) are held to
 * JPEG_MAX_WORK. */
#define JPEG_MAX_BYTES ((size_t)1 << 30)
#define JPEG_MAX_PIXELS ((size_t)1 << 28)
#define JPEG_MAX_WORK (512L << 20)

typedef struct jpeg_guard {
    struct jpeg_error_mgr pub;
    jmp_buf jmp;
    char msg[JMSG_LENGTH_MAX];
    int corrupt;                 /* a warning that means damaged image data */
} jpeg_guard;

static void on_error(j_common_ptr c)
{
    jpeg_guard *g = (jpeg_guard *)c->err;
    (*c->err->format_message)(c, g->msg);
    longjmp(g->jmp, 1);
}

static void on_message(j_common_ptr c, int level)
{
    jpeg_guard *g = (jpeg_guard *)c->err;
    if (level >= 0 || c->err->msg_code == JWRN_EXTRANEOUS_DATA || g->corrupt) return;
    (*c->err->format_message)(c, g->msg);
    g->corrupt = 1;
}

static unsigned rd16(const uint8_t *p, int le)
{
    return le ? (unsigned)p[0] | (unsigned)p[1] << 8 : (unsigned)p[0] << 8 | p[1];
}

static uint32_t rd32(const uint8_t *p, int le)
{
    return le ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
              : (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int exif_orientation(const uint8_t *p, size_t len)
{
    if (len < 6 + 8 || memcmp(p, "Exif\0\0", 6) != 0) return 1;
    p += 6;
    len -= 6;
    int le;
    if (!memcmp(p, "II*\0", 4)) le = 1;
    else if (!memcmp(p, "MM\0*", 4)) le = 0;
    else return 1;
    uint32_t ifd = rd32(p + 4, le);
    if (ifd > len - 2) return 1;
    unsigned n = rd16(p + ifd, le);
    for (unsigned i = 0; i < n; i++) {
        size_t at = (size_t)ifd + 2 + (size_t)12 * i;
        if (at + 12 > len) return 1;
        if (rd16(p + at, le) != 0x0112) continue;
        if (rd16(p + at + 2, le) != 3) return 1;   /* SHORT */
        unsigned v = rd16(p + at + 8, le);
        return v >= 1 && v <= 8 ? (int)v : 1;
    }
    return 1;
}

/* The orientation of the first EXIF APP1 marker libjpeg saved; 1 without one. */
static int saved_orientation(j_decompress_ptr c)
{
    for (jpeg_saved_marker_ptr m = c->marker_list; m; m = m->next)
        if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 && !memcmp(m->data, "Exif\0\0", 6))
            return exif_orientation(m->data, m->data_length);
    return 1;
}

/* CMYK rows as stored (row of 4 * w) into gray or RGB. */
static void cmyk_row(const uint8_t *in, int w, int inverted, int ch, uint8_t *out)
{
    for (int x = 0; x < w; x++) {
        const uint8_t *p = in + 4 * x;
        int k = p[3], rgb[3];
        for (int i = 0; i < 3; i++)
            rgb[i] = inverted ? (p[i] * k + 127) / 255 : ((255 - p[i]) * (255 - k) + 127) / 255;
        if (ch == 3) {
            for (int i = 0; i < 3; i++) out[3 * x + i] = (uint8_t)rgb[i];
        } else {
            out[x] = (uint8_t)((299 * rgb[0] + 587 * rgb[1] + 114 * rgb[2] + 500) / 1000);
        }
    }
}

/* Everything that may longjmp. */
static vdnn_status decode(j_decompress_ptr c, jpeg_guard *g, const char *name, const uint8_t *buf, size_t len,
                          int ch, jpeg_scale_fn scale_of, void *ctx, img8 *out, uint8_t **row4)
{
    jpeg_mem_src(c, buf, (unsigned long)len);
    jpeg_save_markers(c, JPEG_APP0 + 1, 0xFFFF);
    jpeg_read_header(c, TRUE);
    if ((size_t)c->image_width * c->image_height > JPEG_MAX_PIXELS)
        return vdnn_fail(VDNN_EFORMAT, "%s: JPEG of %ux%u is too large (more than %zu pixels)", name, c->image_width,
                         c->image_height, JPEG_MAX_PIXELS);
    out->orientation = saved_orientation(c);
    int cmyk = c->jpeg_color_space == JCS_CMYK || c->jpeg_color_space == JCS_YCCK;
    c->out_color_space = cmyk ? JCS_CMYK : ch == 1 ? JCS_GRAYSCALE : JCS_RGB;
    int num = scale_of ? scale_of(ctx, (int)c->image_width, (int)c->image_height, out->orientation) : 8;
    c->scale_num = (unsigned)(num < 1 ? 1 : num > 8 ? 8 : num);
    c->scale_denom = 8;
    jpeg_calc_output_dimensions(c);
    size_t w = c->output_width, h = c->output_height;
    if (w == 0 || h == 0 || w > JPEG_MAX_BYTES / h / 4)
        return vdnn_fail(VDNN_EFORMAT, "%s: JPEG of %ux%u is too large to decode", name, c->image_width,
                         c->image_height);
    out->px = malloc(w * h * (size_t)ch);
    *row4 = cmyk ? malloc(w * 4) : NULL;
    if (!out->px || (cmyk && !*row4)) return vdnn_fail(VDNN_ENOMEM, "%s: out of host memory decoding", name);
    out->w = (int)w;
    out->h = (int)h;
    out->ch = ch;
    jpeg_start_decompress(c);
    if ((int)c->output_components != (cmyk ? 4 : ch))
        return vdnn_fail(VDNN_EFORMAT, "%s: unsupported JPEG colour layout (%d components)", name,
                         c->output_components);
    while (c->output_scanline < c->output_height) {
        uint8_t *row = out->px + (size_t)c->output_scanline * w * (size_t)ch;
        JSAMPROW rp = cmyk ? *row4 : row;
        if (jpeg_read_scanlines(c, &rp, 1) != 1) break;
        if (cmyk) cmyk_row(*row4, (int)w, c->saw_Adobe_marker, ch, row);
        if (g->corrupt) break;
    }
    if (g->corrupt) return vdnn_fail(VDNN_EFORMAT, "%s: corrupt or truncated JPEG (%s)", name, g->msg);
    jpeg_finish_decompress(c);
    if (g->corrupt) return vdnn_fail(VDNN_EFORMAT, "%s: corrupt or truncated JPEG (%s)", name, g->msg);
    return VDNN_OK;
}

/* setjmp in a function of its own whose locals never change after it. */
static vdnn_status decode_guarded(j_decompress_ptr c, jpeg_guard *g, const char *name, const uint8_t *buf,
                                  size_t len, int ch, jpeg_scale_fn scale_of, void *ctx, img8 *out, uint8_t **row4)
{
    if (setjmp(g->jmp)) return vdnn_fail(VDNN_EFORMAT, "%s: corrupt or truncated JPEG (%s)", name, g->msg);
    jpeg_create_decompress(c);
    c->mem->max_memory_to_use = JPEG_MAX_WORK;
    return decode(c, g, name, buf, len, ch, scale_of, ctx, out, row4);
}

vdnn_status jpeg_decode(const char *name, const uint8_t *buf, size_t len, int ch, jpeg_scale_fn scale_of,
                        void *ctx, img8 *out)
{
    memset(out, 0, sizeof *out);
    if (ch != 1 && ch != 3) return vdnn_fail(VDNN_EINVAL, "%s: JPEG decoding gives 1 or 3 channels, not %d", name, ch);
    struct jpeg_decompress_struct *c = calloc(1, sizeof *c);
    jpeg_guard *g = calloc(1, sizeof *g);
    uint8_t *row4 = NULL;
    vdnn_status s;
    if (!c || !g) {
        s = vdnn_fail(VDNN_ENOMEM, "%s: out of host memory for libjpeg", name);
    } else {
        c->err = jpeg_std_error(&g->pub);
        g->pub.error_exit = on_error;
        g->pub.emit_message = on_message;
        s = decode_guarded(c, g, name, buf, len, ch, scale_of, ctx, out, &row4);
        jpeg_destroy_decompress(c);   /* also after a failed create: its memory manager is then NULL */
    }
    free(row4);
    free(c);
    free(g);
    if (s) img8_free(out);
    return s;
}
