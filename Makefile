# vdnn: train CNNs from config files inside a device-memory budget.
#
#   make            build build/vdnn: the CPU backend, and the CUDA backend when nvcc,
#                   cuDNN and cuBLAS are found (tools/find_cuda.sh; docs/building.md)
#   make test       build and run every Check suite
#   make sanitize   the same suites under AddressSanitizer + UndefinedBehaviorSanitizer
#   make tsan       the same suites under ThreadSanitizer
#   make fuzz       every fuzz target (tests/fuzz/) under libFuzzer, ASan and UBSan for
#                   FUZZ_SECONDS each (clang: sh tools/setup.sh); docs/readers.md
#   make clean
#
# Variables: OPT (optimisation flags), BUILD (output folder), SAN (sanitizer flags), WERROR,
# CUDA (auto, 0: CPU only, 1: fail without CUDA), CUDA_HOME, CUDNN_HOME, CUDA_ARCH,
# SYSROOT (libraries unpacked by tools/sysroot.sh), MPI (auto, 0: without, 1: fail without),
# ONNX (1, 0: without `vdnn import`/`export`/`onnx-test`), ONNX_PROTO, PROTOC_C,
# ONEDNN (auto, 0: the project's own CPU convolutions only, 1: fail without oneDNN),
# FUZZ_CC (clang for `make fuzz`), FUZZ_SECONDS (how long `make fuzz` runs each target,
# default 60).

# `make` alone builds the program, whatever rule comes first below.
.DEFAULT_GOAL := all

# Every build compiles one file per core unless -j says otherwise on the command line.
NPROC   := $(shell nproc 2>/dev/null || echo 1)
MAKEFLAGS += -j$(NPROC)

CC      ?= cc
comma   := ,
OPT     ?= -O3 -march=native
BUILD   ?= build
SAN     ?=
# -ffp-contract=off: no fused multiply-adds, as nets/solver.cu rounds each operation, so
# that a parameter updated on the host (swapped) and one updated on a GPU agree bit for bit.
# WERROR= (empty) keeps warnings from stopping the build: for a compiler newer than the
# one this code is checked with, whose -Wextra may warn where it does not.
WERROR  ?= -Werror
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -g -Wall -Wextra $(WERROR) -Wno-unknown-pragmas -Wno-format-truncation \
               -ffp-contract=off -fopenmp -I. -MMD -MP
CFLAGS  := $(CFLAGS_BASE) $(OPT) $(SAN) $(EXTRA_CFLAGS)
# OpenBLAS built on OpenMP shares one thread pool with our own OpenMP kernels; the
# pthread build's threads and OpenMP's would spin against each other on few cores.
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
# SYSROOT: a folder of Debian's libraries unpacked by tools/sysroot.sh, for machines
# that cannot install them (the lent GPU machines).
SYSROOT ?=
ifneq ($(SYSROOT),)
SYS_LIB   := $(SYSROOT)/usr/lib/$(MULTIARCH)
CFLAGS    += -I$(SYSROOT)/usr/include -I$(SYSROOT)/usr/include/$(MULTIARCH) \
             -I$(SYSROOT)/usr/include/$(MULTIARCH)/openblas-openmp
BLAS_DIR  := $(SYS_LIB)/openblas-openmp
SYS_LIBS  := -L$(SYS_LIB) -Wl,-rpath,$(SYS_LIB) -L$(SYSROOT)/lib/$(MULTIARCH) -Wl,-rpath,$(SYSROOT)/lib/$(MULTIARCH)
CHECK_LIBS := $(SYS_LIBS) -lcheck -lsubunit -lrt -lm
# DT_RPATH, not DT_RUNPATH: the loader searches a RUNPATH only for the binary's own
# dependencies, and OpenBLAS's libgfortran must come from the sysroot too.
SYS_LDFLAGS := -Wl,--disable-new-dtags
endif
BLAS_DIR ?= $(firstword $(wildcard /usr/lib/$(MULTIARCH)/openblas-openmp))
BLAS_LIBS := $(if $(BLAS_DIR),-L$(BLAS_DIR) -Wl$(comma)-rpath$(comma)$(BLAS_DIR)) -lopenblas
# Jansson (libjansson-dev) writes and reads every JSON vdnn makes: logs, traces, --json.
# libjpeg-turbo (libjpeg62-turbo-dev) decodes the JPEG files of image folders.
LDLIBS  := $(BLAS_LIBS) $(SYS_LIBS) -lpng -ljpeg -ljansson -lz -lpthread -lm
CHECK_LIBS ?= $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -lm)
LDFLAGS := -fopenmp $(SAN) $(SYS_LDFLAGS)

# MPI (Open MPI from Debian: libopenmpi-dev): found with mpicc; without it vdnn runs one
# process and refuses to be launched by mpirun as several. MPI=0 builds without it.
MPI        ?= auto
# a sysroot build is for a machine that cannot install packages: MPI only if asked for
ifneq ($(SYSROOT),)
ifeq ($(MPI),auto)
override MPI := 0
endif
endif
ifneq ($(MPI),0)
MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null)
MPI_LIBS   := $(shell mpicc --showme:link 2>/dev/null)
endif
ifneq ($(strip $(MPI_LIBS)),)
CFLAGS     += -DVDNN_MPI $(MPI_CFLAGS)
LDLIBS     += $(MPI_LIBS)
else ifeq ($(MPI),1)
$(error MPI=1 but mpicc was not found: install libopenmpi-dev)
endif

# CUDA: found once per make run; every object then knows VDNN_CUDA. The .cu halves
# are compiled by nvcc for the GPU generations CUDA 13 supports (Turing to Hopper, plus
# PTX for newer ones).
CUDA       ?= auto
FIND_CUDA  := CUDA='$(CUDA)' CUDA_HOME='$(CUDA_HOME)' CUDNN_HOME='$(CUDNN_HOME)' sh tools/find_cuda.sh
NVCC       := $(shell $(FIND_CUDA) nvcc)
ifneq ($(NVCC),)
CUDA_INC   := $(shell $(FIND_CUDA) inc)
CUDA_LIBS  := $(shell $(FIND_CUDA) libs)
CUDA_ARCH  ?= -gencode arch=compute_75,code=sm_75 -gencode arch=compute_80,code=sm_80 \
              -gencode arch=compute_86,code=sm_86 -gencode arch=compute_90,code=sm_90 \
              -gencode arch=compute_90,code=compute_90
CFLAGS     += -DVDNN_CUDA $(CUDA_INC)
NVCCFLAGS  := -std=c++17 -O3 -g -lineinfo $(CUDA_ARCH) -DVDNN_CUDA -I. $(CUDA_INC) \
              -Xcompiler -Wall,-Wextra$(if $(WERROR),$(comma)-Werror) $(if $(WERROR),-Werror all-warnings)
LDLIBS     += $(CUDA_LIBS) -lstdc++
CU_SRC     := $(sort $(wildcard vdnn/*.cu layers/*.cu nets/*.cu))
else ifeq ($(CUDA),1)
$(error CUDA=1 but nvcc, cuDNN or cuBLAS was not found: see the "cuda:" line above, or set CUDA_HOME / CUDNN_HOME)
endif

# ONNX (`vdnn import`, `export`, `onnx-test`): the protobuf code is generated by protoc-c
# (protobuf-c-compiler) from the onnx.proto that libonnx-dev ships, and linked with
# libprotobuf-c; sh tools/setup.sh installs all three. ONNX=0 builds without it (the
# commands then say so); a sysroot build, for a machine that cannot install packages,
# leaves it out unless ONNX=1.
ONNX       ?= 1
ifneq ($(SYSROOT),)
ifeq ($(origin ONNX),file)
override ONNX := 0
endif
endif
ONNX_PROTO ?= /usr/include/onnx/onnx.proto
PROTOC_C   ?= protoc-c
ifneq ($(ONNX),0)
# (`make clean` alone needs none of it)
ifneq ($(if $(MAKECMDGOALS),$(filter-out clean,$(MAKECMDGOALS)),all),)
ifeq ($(shell command -v $(PROTOC_C) 2>/dev/null),)
$(error ONNX: $(PROTOC_C) was not found: install protobuf-c-compiler libprotobuf-c-dev libonnx-dev (sh tools/setup.sh), or build with ONNX=0)
endif
ifeq ($(wildcard $(ONNX_PROTO)),)
$(error ONNX: $(ONNX_PROTO) was not found: install libonnx-dev (sh tools/setup.sh), set ONNX_PROTO, or build with ONNX=0)
endif
ifeq ($(wildcard /usr/include/protobuf-c/protobuf-c.h),)
$(error ONNX: protobuf-c/protobuf-c.h was not found: install libprotobuf-c-dev (sh tools/setup.sh), or build with ONNX=0)
endif
endif
ONNX_GEN   := $(BUILD)/gen/onnx.pb-c.c
CFLAGS     += -DVDNN_ONNX -I$(BUILD)/gen
LDLIBS     += -lprotobuf-c
endif

# oneDNN (libdnnl-dev): its convolutions as CPU algorithms beside the project's own, which
# the profiler times like any other (docs/building.md). auto: used when its header is
# found; 0: without; 1: fail without. A sysroot build leaves it out unless ONEDNN=1.
ONEDNN     ?= auto
ifneq ($(SYSROOT),)
ifeq ($(ONEDNN),auto)
override ONEDNN := 0
endif
endif
ONEDNN_H   := $(wildcard $(SYSROOT)/usr/include/oneapi/dnnl/dnnl.h)
ifeq ($(ONEDNN),auto)
override ONEDNN := $(if $(ONEDNN_H),1,0)
endif
ifeq ($(ONEDNN),1)
ifeq ($(ONEDNN_H),)
$(error ONEDNN=1 but oneapi/dnnl/dnnl.h was not found: install libdnnl-dev (sh tools/setup.sh), or build with ONEDNN=0)
endif
CFLAGS     += -DVDNN_ONEDNN
LDLIBS     += -ldnnl
endif

# What this build was configured with: the compiler, every flag and every library that
# detection found (MPI, CUDA, OpenBLAS, SYSROOT, SAN, OPT, ...). It is written to
# $(BUILD)/build-config only when it differs from what is there, and every object and
# program depends on that file, so that installing or removing an optional part, or
# building with other flags, rebuilds what it changes, and nothing else does. Goals that
# only start another make (sanitize, tsan, fuzz) or remove the build leave it alone.
BUILD_CONFIG := $(BUILD)/build-config
CC_VERSION   := $(shell $(CC) --version 2>/dev/null | head -n 1)
define BUILD_CONFIG_TEXT
CC = $(CC) ($(CC_VERSION))
CFLAGS = $(CFLAGS)
NVCC = $(NVCC)
NVCCFLAGS = $(NVCCFLAGS)
LDFLAGS = $(LDFLAGS)
LDLIBS = $(LDLIBS)
CHECK_LIBS = $(CHECK_LIBS)
endef
ifneq ($(if $(MAKECMDGOALS),$(filter-out clean sanitize tsan fuzz,$(MAKECMDGOALS)),all),)
ifneq ($(file <$(BUILD_CONFIG)),$(BUILD_CONFIG_TEXT))
$(shell mkdir -p $(BUILD))
$(file >$(BUILD_CONFIG),$(BUILD_CONFIG_TEXT))
endif
endif
# again when it went after make read it (`make clean all`)
$(BUILD_CONFIG):
	@mkdir -p $(dir $@)
	$(file >$@,$(BUILD_CONFIG_TEXT))

LIB_SRC   := $(sort $(wildcard vdnn/*.c layers/*.c nets/*.c nets/*/*.c data/*.c manager/*.c) \
                    $(if $(ONNX_GEN),$(wildcard onnx/*.c)))
TOOL_SRC  := $(sort $(wildcard tools/*.c))
TEST_UTIL := $(sort $(filter-out tests/test_%.c,$(wildcard tests/*.c)))
TEST_SRC  := $(sort $(wildcard tests/test_*.c))

LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(CU_SRC:%.cu=$(BUILD)/obj/%.cu.o) \
             $(ONNX_GEN:$(BUILD)/gen/%.c=$(BUILD)/obj/gen/%.o)
TOOL_OBJ  := $(TOOL_SRC:%.c=$(BUILD)/obj/%.o)
UTIL_OBJ  := $(TEST_UTIL:%.c=$(BUILD)/obj/%.o)
TEST_BIN  := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
LIB       := $(BUILD)/libvdnn.a

.PHONY: all test sanitize tsan clean tests fuzz fuzz-targets fuzz-seeds
all: $(BUILD)/vdnn

$(BUILD)/obj/%.o: %.c $(BUILD_CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# The ONNX protobuf code, generated into the build folder; every ONNX source waits for its
# header. It is protoc-c's, compiled without -Werror.
$(BUILD)/gen/onnx.pb-c.c $(BUILD)/gen/onnx.pb-c.h &: $(ONNX_PROTO) $(BUILD_CONFIG)
	@mkdir -p $(BUILD)/gen
	$(PROTOC_C) --proto_path=$(dir $(ONNX_PROTO)) --c_out=$(BUILD)/gen $(ONNX_PROTO)

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c $(BUILD_CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -Werror,$(CFLAGS)) -Wno-unused-parameter -c $< -o $@

$(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard onnx/*.c tools/*.c tests/*.c tests/fuzz/*.c)): | $(ONNX_GEN:.c=.h)

$(BUILD)/obj/%.cu.o: %.cu $(BUILD_CONFIG)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -MF $(@:.o=.d) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/vdnn: $(TOOL_OBJ) $(LIB) $(BUILD_CONFIG)
	$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(UTIL_OBJ) $(LIB) $(BUILD_CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(UTIL_OBJ) $(LIB) $(CHECK_LIBS) $(LDLIBS)

# The fuzz targets, built with the normal compiler for tests/test_fuzz.c, which replays
# their corpora (FUZZ_REPLAY names each entry point after its target).
FUZZ_SRC        := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_NAMES      := $(FUZZ_SRC:tests/fuzz/fuzz_%.c=%)
FUZZ_REPLAY_OBJ := $(patsubst tests/fuzz/%.c,$(BUILD)/obj/tests/fuzz/replay/%.o,$(FUZZ_SRC) tests/fuzz/common.c)

$(BUILD)/obj/tests/fuzz/replay/%.o: tests/fuzz/%.c $(BUILD_CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DFUZZ_REPLAY -c $< -o $@

$(BUILD)/tests/test_fuzz: $(BUILD)/obj/tests/test_fuzz.o $(FUZZ_REPLAY_OBJ) $(UTIL_OBJ) $(LIB) $(BUILD_CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(FUZZ_REPLAY_OBJ) $(UTIL_OBJ) $(LIB) $(CHECK_LIBS) $(LDLIBS)

tests: $(TEST_BIN) $(BUILD)/vdnn

test: tests
	@VDNN_BIN=$(BUILD)/vdnn sh tests/run.sh $(TEST_BIN)

# The sanitizer builds compile the CUDA halves for one GPU generation only: they are
# there to be linked and to run the C side under the sanitizers, not for speed.
# protect_shadow_gap=0 lets the CUDA driver map what it needs beside ASan's shadow.
SAN_CUDA_ARCH := -gencode arch=compute_90,code=sm_90

# Under a sanitizer each suite runs in one process (CK_FORK=no): forking an instrumented
# process and checking it for leaks at every exit cost more than most checks themselves.
# A leak anywhere in a suite still fails it, at its exit; VDNN_SUITE_TIMEOUT (tests/run.sh)
# stands in for the per-check timeouts that only forked checks have. The suites run one
# per core, each with one OpenMP thread (the checks of several threads ask for them by
# name), and no check times anything there (tests/tsan.h).
# The suites of the build and its scripts (tools/, bench/) have no code of ours to
# instrument: both passes leave them out with a SKIPPED line each.
SAN_RUN  := CK_FORK=no VDNN_SUITE_TIMEOUT=900 VDNN_TEST_JOBS=$(NPROC) OMP_NUM_THREADS=1
SAN_SKIP := build findcuda gpu_scripts sysroot

sanitize:
	ASAN_OPTIONS="$${ASAN_OPTIONS:+$$ASAN_OPTIONS:}protect_shadow_gap=0" $(SAN_RUN) \
	    VDNN_SKIP_SUITES="$(SAN_SKIP:%=test_%)" VDNN_SKIP_WHY="tests the build or scripts; make test runs it" \
	    $(MAKE) BUILD=build-asan OPT="-O1" \
	    CUDA_ARCH="$(SAN_CUDA_ARCH)" SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" test

# libgomp is not built with ThreadSanitizer, so its own synchronisation would show as
# races: the suites run with one OpenMP thread, which leaves every thread of ours (the
# copy engine, the data loader) under the sanitizer's eye.
# ThreadSanitizer finds races only where several threads of ours run: the CPU device's
# copy engine doing copies (offload, prefetch, swap), the data loader, data-parallel
# device threads. The suites in TSAN_SKIP print one SKIPPED line each under it: those
# where no thread of ours does work (layers, readers, the build, the manager, the
# command line run as a program) and those whose threaded paths a smaller suite here
# runs too (budget_graph: graph and budget). make test runs them all, make sanitize all
# but the build's (SAN_SKIP).
TSAN_SKIP := $(SAN_SKIP) activation batchnorm connected conv dropout loss lrn pooling softmax \
             checkpoint config data mempool net planfile fuzz papernets onnx \
             cuda cli hostile manager sweep budget_graph

tsan:
	$(SAN_RUN) VDNN_SKIP_SUITES="$(TSAN_SKIP:%=test_%)" \
	    VDNN_SKIP_WHY="left out under ThreadSanitizer (Makefile: TSAN_SKIP); make test runs it" \
	    $(MAKE) BUILD=build-tsan OPT="-O1" CUDA_ARCH="$(SAN_CUDA_ARCH)" SAN="-fsanitize=thread" test

# libFuzzer: the library and every target built by clang with coverage, ASan and UBSan
# into build-fuzz/ (no CUDA; no oneDNN, whose library brings GCC's OpenMP runtime beside
# clang's), then each target run for FUZZ_SECONDS from its seeds
# (tests/fuzz/seeds/), its past crashes (tests/fuzz/crashes/) and its dictionary.
# A crash fails the run and leaves the input in build-fuzz/crashes/ (tests/fuzz/run.sh).
FUZZ_CC      ?= $(firstword $(shell command -v clang-14 clang 2>/dev/null))
FUZZ_SECONDS ?= 60
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer

fuzz:
	@test -n "$(FUZZ_CC)" || { echo "make fuzz needs clang with libFuzzer (Debian: clang-14 libclang-rt-14-dev libomp-14-dev; sh tools/setup.sh)"; exit 1; }
	$(MAKE) BUILD=build-fuzz CC=$(FUZZ_CC) CUDA=0 ONEDNN=0 OPT="-O1 -gline-tables-only" SAN="$(FUZZ_SAN)" \
	    EXTRA_CFLAGS="-fsanitize=fuzzer-no-link -Wno-unknown-warning-option" fuzz-targets
	FUZZ_SECONDS=$(FUZZ_SECONDS) sh tests/fuzz/run.sh build-fuzz $(FUZZ_NAMES)

fuzz-targets: $(FUZZ_NAMES:%=$(BUILD)/fuzz/fuzz_%)

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(BUILD)/obj/tests/fuzz/common.o $(LIB) $(BUILD_CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer -o $@ $< $(BUILD)/obj/tests/fuzz/common.o $(LIB) $(LDFLAGS) $(LDLIBS)

# Regenerates the generated seeds (tests/fuzz/make_seeds.c) and copies configs/ in.
fuzz-seeds: $(BUILD)/fuzz/make_seeds
	$(BUILD)/fuzz/make_seeds tests/fuzz/seeds
	cp configs/*.cfg tests/fuzz/seeds/config/

$(BUILD)/fuzz/make_seeds: $(BUILD)/obj/tests/fuzz/make_seeds.o $(BUILD)/obj/tests/fuzz/common.o \
                         $(BUILD)/obj/tests/imagefiles.o $(LIB) $(BUILD_CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter-out $(BUILD_CONFIG),$^) $(LDLIBS)

clean:
	rm -rf build build-asan build-tsan build-fuzz

-include $(patsubst %.o,%.d,$(LIB_OBJ)) $(TOOL_OBJ:.o=.d) $(UTIL_OBJ:.o=.d) $(TEST_SRC:tests/%.c=$(BUILD)/obj/tests/%.d) \
         $(FUZZ_REPLAY_OBJ:.o=.d) $(wildcard $(BUILD)/fuzz/*.d)
