# vdnn: train CNNs from config files inside a device-memory budget.
#
#   make            build build/vdnn (CPU backend; CUDA when found, see docs/building.md)
#   make test       build and run every Check suite
#   make sanitize   the same suites under AddressSanitizer + UndefinedBehaviorSanitizer
#   make tsan       the same suites under ThreadSanitizer
#   make clean
#
# Variables: OPT (optimisation flags), BUILD (output folder), SAN (sanitizer flags).

CC      ?= cc
comma   := ,
OPT     ?= -O3 -march=native
BUILD   ?= build
SAN     ?=
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -g -Wall -Wextra -Werror -Wno-unknown-pragmas -Wno-format-truncation \
               -fopenmp -I. -MMD -MP
CFLAGS  := $(CFLAGS_BASE) $(OPT) $(SAN) $(EXTRA_CFLAGS)
# OpenBLAS built on OpenMP shares one thread pool with our own OpenMP kernels; the
# pthread build's threads and OpenMP's would spin against each other on few cores.
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
BLAS_DIR ?= $(firstword $(wildcard /usr/lib/$(MULTIARCH)/openblas-openmp))
BLAS_LIBS := $(if $(BLAS_DIR),-L$(BLAS_DIR) -Wl$(comma)-rpath$(comma)$(BLAS_DIR)) -lopenblas
LDLIBS  := $(BLAS_LIBS) -lpng -lz -lpthread -lm
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -lm)
LDFLAGS := -fopenmp $(SAN)

LIB_SRC   := $(sort $(wildcard vdnn/*.c layers/*.c nets/*.c data/*.c))
TOOL_SRC  := $(sort $(wildcard tools/*.c))
TEST_UTIL := $(sort $(filter-out tests/test_%.c,$(wildcard tests/*.c)))
TEST_SRC  := $(sort $(wildcard tests/test_*.c))

LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
TOOL_OBJ  := $(TOOL_SRC:%.c=$(BUILD)/obj/%.o)
UTIL_OBJ  := $(TEST_UTIL:%.c=$(BUILD)/obj/%.o)
TEST_BIN  := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
LIB       := $(BUILD)/libvdnn.a

.PHONY: all test sanitize tsan clean tests
all: $(BUILD)/vdnn

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/vdnn: $(TOOL_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(UTIL_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(UTIL_OBJ) $(LIB) $(CHECK_LIBS) $(LDLIBS)

tests: $(TEST_BIN) $(BUILD)/vdnn

test: tests
	@VDNN_BIN=$(BUILD)/vdnn sh tests/run.sh $(TEST_BIN)

sanitize:
	$(MAKE) BUILD=build-asan OPT="-O1" SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" test

# libgomp is not built with ThreadSanitizer, so its own synchronisation would show as
# races: the suites run with one OpenMP thread, which leaves every thread of ours (the
# copy engine, the data loader) under the sanitizer's eye.
tsan:
	OMP_NUM_THREADS=1 $(MAKE) BUILD=build-tsan OPT="-O1" SAN="-fsanitize=thread" test

clean:
	rm -rf build build-asan build-tsan

-include $(LIB_OBJ:.o=.d) $(TOOL_OBJ:.o=.d) $(UTIL_OBJ:.o=.d) $(TEST_SRC:tests/%.c=$(BUILD)/obj/tests/%.d)
