# Makefile - builds inagg: the worker library, the `inagg` command, the tests, the MPI programs.
#
#   make            release build into build/
#   make SAN=1      ASan+UBSan build into build-san/
#   make tsan       ThreadSanitizer build of the tests into build-tsan/ (TSAN=1)
#   make test       build and run the test suite (tests/run)
#   make mutate     check that the tests catch the bugs of tests/mutate/mutations
#
# What goes where (src/README.md: three products, each a folder of folders):
#   build/libinagg.a, build/libinagg.so   the worker library, src/lib/ and nothing else; both
#                                         export only the public API (inagg_*)
#   build/internal/libworker.a            the same objects with their internal symbols
#                                         visible, for the programs and tests built here
#   build/internal/libswitch.a            the switch daemon, src/switchd/
#   build/internal/libapps.a              the applications, src/apps/ (trainer, training run, launcher,
#                                         benchmarks, model), less cli/ and mpi/
#   build/inagg                           src/apps/cli/ + the three above
#   build/inagg-mpi-bench, -mpi-train     separate programs linking OpenMPI (src/apps/mpi/)
#   build/libnccl-net-inagg.so            the NCCL net and CollNet plugin (src/apps/nccl/), and
#   build/nccl-harness                    the program that drives it as NCCL would (tests/)
# Warnings are errors.

CC      ?= cc
SAN     ?= 0
TSAN    ?= 0
ifeq ($(TSAN),1)
BUILD   ?= build-tsan
OPT     := -O1 -g -fno-omit-frame-pointer -fsanitize=thread
LDSAN   := -fsanitize=thread
else ifeq ($(SAN),1)
BUILD   ?= build-san
OPT     := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
LDSAN   := -fsanitize=address,undefined
else
BUILD   ?= build
OPT     := -O3 -g
LDSAN   :=
endif

CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
               -Wmissing-prototypes -Wno-missing-field-initializers -fno-strict-aliasing -pthread -Iinclude -Isrc
CFLAGS  := $(CFLAGS_BASE) $(OPT) $(EXTRA_CFLAGS)
LDFLAGS := -pthread $(LDSAN) $(EXTRA_LDFLAGS)
LDLIBS  := -lzfp -lisal -lsodium -lcrypto -lm
# the switch side's own: AF_XDP sockets (libxdp) and the XDP program's loader (libbpf)
SWITCH_LDLIBS := -lxdp -lbpf

VERSION_MAJOR := $(shell sed -n 's/^\#define INAGG_VERSION_MAJOR \([0-9]*\)/\1/p' include/inagg/version.h)
VERSION       := $(shell sed -n 's/^\#define INAGG_VERSION_STRING "\(.*\)"/\1/p' include/inagg/version.h)
SONAME        := libinagg.so.$(VERSION_MAJOR)

# Sources by product (src/README.md): every .c of a product's folders, so a new file needs no
# edit here. The MPI programs, the PMPI interposer (src/apps/mpi/), the Open MPI component
# (src/apps/ompi/) and the NCCL plugin (src/apps/nccl/) are built further down; of them only the
# route, pure C, is in libapps.a.
WORKER_SRC := $(wildcard src/lib/*/*.c)
SWITCH_SRC := $(wildcard src/switchd/*.c src/switchd/*/*.c)
APPS_SRC   := $(filter-out src/apps/cli/% src/apps/mpi/% src/apps/ompi/% src/apps/nccl/%,$(wildcard src/apps/*/*.c)) \
              src/apps/mpi/route.c
CLI_SRC    := $(wildcard src/apps/cli/*.c)
TEST_SRC   := $(wildcard tests/test_*.c) tests/harness.c tests/testutil.c

WORKER_OBJ := $(WORKER_SRC:%.c=$(BUILD)/%.o)
WORKER_PIC := $(WORKER_SRC:%.c=$(BUILD)/pic/%.o)
SWITCH_OBJ := $(SWITCH_SRC:%.c=$(BUILD)/%.o)
APPS_OBJ   := $(APPS_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ    := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ   := $(TEST_SRC:%.c=$(BUILD)/%.o)

LIBS_INTERNAL := $(BUILD)/internal/libapps.a $(BUILD)/internal/libswitch.a $(BUILD)/internal/libworker.a

MPICC := $(shell command -v mpicc 2>/dev/null)

.PHONY: all test clean san tsan
all: $(BUILD)/inagg $(BUILD)/inagg-tests $(BUILD)/libinagg.a \
     $(if $(filter 0,$(SAN)),$(BUILD)/libinagg.so) \
     $(if $(MPICC),$(BUILD)/inagg-mpi-bench $(BUILD)/inagg-mpi-train)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -MMD -MP -c $< -o $@

# The installed static library is one relocatable object (ld -r) in which every symbol but the
# public API is made local (objcopy), as the shared library's version script does for it: an
# application linking libinagg.a sees inagg_* and nothing else, so no internal name of ours
# (ctl_*, udp_*, sha256 ...) can clash with one of its own. tests/symbols.sh checks it.
$(BUILD)/libinagg.a: $(WORKER_OBJ)
	@rm -f $@ $(BUILD)/libinagg.o
	ld -r -o $(BUILD)/libinagg.o $^
	objcopy --wildcard --keep-global-symbol='inagg_*' $(BUILD)/libinagg.o
	ar rcs $@ $(BUILD)/libinagg.o
	@rm -f $(BUILD)/libinagg.o

$(BUILD)/internal/libworker.a: $(WORKER_OBJ)
	@mkdir -p $(dir $@)
	@rm -f $@
	ar rcs $@ $^

# The shared library exports the public API (inagg_*) and nothing else (libinagg.map).
$(BUILD)/libinagg.so.$(VERSION): $(WORKER_PIC) src/lib/worker/libinagg.map
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=src/lib/worker/libinagg.map \
	    -Wl,--no-undefined $(LDFLAGS) -o $@ $(WORKER_PIC) $(LDLIBS)

$(BUILD)/libinagg.so: $(BUILD)/libinagg.so.$(VERSION)
	ln -sf libinagg.so.$(VERSION) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $@

$(BUILD)/internal/libswitch.a: $(SWITCH_OBJ)
	@mkdir -p $(dir $@)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/internal/libapps.a: $(APPS_OBJ)
	@mkdir -p $(dir $@)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/inagg: $(CLI_OBJ) $(LIBS_INTERNAL)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(LIBS_INTERNAL) $(SWITCH_LDLIBS) $(LDLIBS)

$(BUILD)/inagg-tests: $(TEST_OBJ) $(LIBS_INTERNAL)
	$(CC) $(LDFLAGS) -o $@ $(TEST_OBJ) $(LIBS_INTERNAL) $(SWITCH_LDLIBS) $(LDLIBS)

# The fabric's XDP program (docs/FABRIC.md, "AF_XDP ports"): compiled for the BPF target and
# embedded in the switch library by xdpblob.c (.incbin), so the binary needs no file beside it.
BPF_CFLAGS := -O2 -g -target bpf -Wall -Werror -Isrc -I/usr/include/$(shell $(CC) -print-multiarch)
$(BUILD)/bpf/steer.bpf.o: src/switchd/fabric/xdp/steer.bpf.c src/switchd/fabric/xdp/steer_conf.h
	@mkdir -p $(dir $@)
	clang $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/src/switchd/fabric/xdpblob.o: $(BUILD)/bpf/steer.bpf.o
$(BUILD)/src/switchd/fabric/xdpblob.o: CFLAGS += -DINAGG_STEER_BPF_OBJ='"$(BUILD)/bpf/steer.bpf.o"'

# The MPI programs link OpenMPI, which the library never does.
$(BUILD)/inagg-mpi-bench: src/apps/mpi/mpi_allreduce_bench.c src/lib/json/json.c src/lib/json/json.h
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS_BASE) -O3 -o $@ src/apps/mpi/mpi_allreduce_bench.c src/lib/json/json.c -lm

# The MPI trainer: the glm trainers over MPI; links the glm sources, never libinagg.
GLM_MPI_SRC := $(filter-out src/apps/glm/coll_inagg.c,$(wildcard src/apps/glm/*.c))
$(BUILD)/inagg-mpi-train: src/apps/mpi/mpi_train.c $(GLM_MPI_SRC) $(wildcard src/apps/glm/*.h) src/lib/json/json.c src/lib/json/json.h src/lib/kernels/optim.c src/lib/kernels/optim.h src/lib/base/optconf.c src/lib/base/optconf.h
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS_BASE) -O3 -o $@ src/apps/mpi/mpi_train.c $(GLM_MPI_SRC) src/lib/json/json.c src/lib/kernels/optim.c src/lib/base/optconf.c -lm

test: all
	bash tests/run

san:
	$(MAKE) SAN=1

# Mutation testing: small deliberate bugs (tests/mutate/mutations), each must fail a test.
.PHONY: mutate
mutate:
	bash tests/mutate/run

# The threaded tests under ThreadSanitizer (tests/tsan.sh runs them).
tsan:
	$(MAKE) TSAN=1 build-tsan/inagg-tests build-tsan/inagg

clean:
	rm -rf build build-san build-tsan

-include $(WORKER_OBJ:.o=.d) $(WORKER_PIC:.o=.d) $(SWITCH_OBJ:.o=.d) $(APPS_OBJ:.o=.d) \
         $(CLI_OBJ:.o=.d) $(TEST_OBJ:.o=.d)

# ---------------------------------------------------------------------------------------------
# Integrations: install, pkg-config, the PMPI interposer, the examples (docs/INTEGRATIONS.md).
#
#   make install PREFIX=/opt/inagg [DESTDIR=...]   lib/libinagg.so.0 (+ .so, .a), include/inagg.h,
#                                                  lib/pkgconfig/inagg.pc, bin/inagg, and
#                                                  lib/libinagg-pmpi.so when OpenMPI is present,
#                                                  mca_coll_inagg.so in Open MPI's component
#                                                  directory when its headers are
#   make ompi-coll       build/mca_coll_inagg.so: the Open MPI component coll/inagg
#   make pmpi            build/libinagg-pmpi.so: LD_PRELOAD it under an unmodified MPI program
#   make examples        build/examples/allreduce against the build tree
#   make test-integrations   bash tests/cli_integrations.sh
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig

.PHONY: install uninstall pmpi examples test-integrations
all: $(if $(and $(MPICC),$(filter 0,$(SAN))),$(BUILD)/libinagg-pmpi.so)

$(BUILD)/inagg.pc: inagg.pc.in include/inagg/version.h
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' -e 's|@VERSION@|$(VERSION)|' $< > $@

# Always regenerated: PREFIX may differ from the last install.
.PHONY: $(BUILD)/inagg.pc

install: $(BUILD)/libinagg.so $(BUILD)/libinagg.a $(BUILD)/inagg $(BUILD)/inagg.pc \
         $(if $(MPICC),$(BUILD)/libinagg-pmpi.so) $(if $(OMPI_HAVE_COLL),$(BUILD)/mca_coll_inagg.so)
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR)/inagg $(DESTDIR)$(PKGCONFIGDIR) \
	    $(DESTDIR)$(BINDIR)
	install -m 755 $(BUILD)/libinagg.so.$(VERSION) $(DESTDIR)$(LIBDIR)/
	ln -sf libinagg.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libinagg.so
	install -m 644 $(BUILD)/libinagg.a $(DESTDIR)$(LIBDIR)/
	install -m 644 include/inagg.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 644 include/inagg/version.h $(DESTDIR)$(INCLUDEDIR)/inagg/
	install -m 644 $(BUILD)/inagg.pc $(DESTDIR)$(PKGCONFIGDIR)/
	install -m 755 $(BUILD)/inagg $(DESTDIR)$(BINDIR)/
	$(if $(MPICC),install -m 755 $(BUILD)/libinagg-pmpi.so $(DESTDIR)$(LIBDIR)/)
	$(if $(OMPI_HAVE_COLL),install -d $(DESTDIR)$(OMPI_COMPONENT_DIR))
	$(if $(OMPI_HAVE_COLL),install -m 644 $(BUILD)/mca_coll_inagg.so $(DESTDIR)$(OMPI_COMPONENT_DIR)/)

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libinagg.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME) \
	    $(DESTDIR)$(LIBDIR)/libinagg.so $(DESTDIR)$(LIBDIR)/libinagg.a \
	    $(DESTDIR)$(LIBDIR)/libinagg-pmpi.so $(DESTDIR)$(INCLUDEDIR)/inagg.h \
	    $(DESTDIR)$(INCLUDEDIR)/inagg/version.h $(DESTDIR)$(PKGCONFIGDIR)/inagg.pc \
	    $(DESTDIR)$(BINDIR)/inagg
	$(if $(OMPI_HAVE_COLL),rm -f $(DESTDIR)$(OMPI_COMPONENT_DIR)/mca_coll_inagg.so)
	-rmdir $(DESTDIR)$(INCLUDEDIR)/inagg

# The interposer carries its own copy of the worker library (position-independent objects)
# and exports only the MPI and Fortran MPI entry points it wraps (pmpi.map), so it needs
# nothing but itself under LD_PRELOAD and cannot clash with a libinagg the program links.
pmpi: $(BUILD)/libinagg-pmpi.so

PMPI_PIC := $(BUILD)/mpi/pmpi.pic.o $(BUILD)/mpi/pmpi_c.pic.o $(BUILD)/mpi/pmpi_fortran.pic.o \
            $(BUILD)/mpi/route.pic.o $(BUILD)/mpi/probe.pic.o $(BUILD)/mpi/greq.pic.o

$(BUILD)/mpi/%.pic.o: src/apps/mpi/%.c src/apps/mpi/pmpi_int.h src/apps/mpi/route.h src/apps/mpi/probe.h src/apps/mpi/greq.h include/inagg.h include/inagg/version.h
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS_BASE) -O2 -g -fPIC -c $< -o $@

$(BUILD)/libinagg-pmpi.so: $(PMPI_PIC) $(WORKER_PIC) src/apps/mpi/pmpi.map
	$(MPICC) -shared -Wl,--version-script=src/apps/mpi/pmpi.map -Wl,--no-undefined $(LDFLAGS) \
	    -o $@ $(PMPI_PIC) $(WORKER_PIC) -ldl $(LDLIBS)

# The Open MPI component coll/inagg (src/apps/ompi/, docs/INTEGRATIONS.md): built out of tree
# against Open MPI's development headers (Debian: libopenmpi-dev), with its own copy of the
# worker library and of the route, exporting only mca_coll_inagg_component (ompi_coll.map).
# `make install` puts it where mpirun finds it, Open MPI's component directory (ompi_info's
# pkglibdir, under DESTDIR) when PREFIX is /usr or /usr/local; under another PREFIX in
# $(LIBDIR)/openmpi, which --mca mca_base_component_path names (OMPI_COMPONENT_DIR=... to choose).
OMPI_INCDIRS := $(if $(MPICC),$(shell $(MPICC) --showme:incdirs 2>/dev/null))
OMPI_LIBDIRS := $(if $(MPICC),$(shell $(MPICC) --showme:libdirs 2>/dev/null))
OMPI_HAVE_COLL := $(if $(OMPI_INCDIRS),$(firstword $(wildcard $(addsuffix /ompi/mca/coll/coll.h,$(OMPI_INCDIRS)))))
OMPI_PKGLIBDIR = $(if $(OMPI_HAVE_COLL),$(shell ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p'))
OMPI_COMPONENT_DIR ?= $(if $(filter /usr /usr/local,$(PREFIX)),$(OMPI_PKGLIBDIR),$(LIBDIR)/openmpi)
OMPI_COLL_PIC := $(patsubst src/apps/ompi/%.c,$(BUILD)/ompi/%.pic.o,$(wildcard src/apps/ompi/*.c)) \
                 $(BUILD)/mpi/route.pic.o $(BUILD)/mpi/probe.pic.o $(BUILD)/mpi/greq.pic.o
.PHONY: ompi-coll
ompi-coll: $(BUILD)/mca_coll_inagg.so
all: $(if $(and $(OMPI_HAVE_COLL),$(filter 0,$(SAN))),$(BUILD)/mca_coll_inagg.so)

$(BUILD)/ompi/%.pic.o: src/apps/ompi/%.c src/apps/ompi/coll_inagg.h src/apps/mpi/route.h src/apps/mpi/probe.h src/apps/mpi/greq.h include/inagg.h include/inagg/version.h
	@mkdir -p $(dir $@)
	$(if $(OMPI_HAVE_COLL),,@echo "ompi-coll: Open MPI's development headers (ompi/mca/coll/coll.h) are not installed: apt-get install libopenmpi-dev"; exit 2)
	$(CC) $(filter-out -std=c11,$(CFLAGS_BASE)) -std=gnu11 $(addprefix -isystem ,$(OMPI_INCDIRS)) -O2 -g -fPIC $(EXTRA_CFLAGS) -c $< -o $@

$(BUILD)/mca_coll_inagg.so: $(OMPI_COLL_PIC) $(WORKER_PIC) src/apps/ompi/ompi_coll.map
	$(CC) -shared -Wl,--version-script=src/apps/ompi/ompi_coll.map -Wl,--no-undefined $(LDFLAGS) \
	    -o $@ $(OMPI_COLL_PIC) $(WORKER_PIC) $(addprefix -L,$(OMPI_LIBDIRS)) -lmpi -lopen-pal $(LDLIBS)

# The NCCL plugin libnccl-net-inagg.so (src/apps/nccl/, docs/INTEGRATIONS.md): NCCL's network
# and CollNet tables over a switch, with its own copy of the worker library, exporting only the
# two tables (nccl_plugin.map). NCCL's headers are not needed (src/apps/nccl/nccl_abi.h). With
# the CUDA runtime (CUDA_HOME, default /usr/local/cuda) it also stages CUDA buffers; without it
# it is built for host memory alone. build/nccl-harness (tests/nccl_harness.c) drives it.
CUDA_HOME ?= /usr/local/cuda
comma := ,
NCCL_CUDA := $(if $(and $(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h),$(wildcard $(CUDA_HOME)/lib64/libcudart.so)),1)
NCCL_CUDA_CFLAGS := $(if $(NCCL_CUDA),-DINAGG_NCCL_CUDA -isystem $(CUDA_HOME)/include)
NCCL_CUDA_LIBS := $(if $(NCCL_CUDA),-L$(CUDA_HOME)/lib64 -Wl$(comma)-rpath$(comma)$(CUDA_HOME)/lib64 -lcudart)
NCCL_SRC := $(wildcard src/apps/nccl/*.c)
NCCL_PIC := $(NCCL_SRC:src/apps/nccl/%.c=$(BUILD)/nccl/%.pic.o)
.PHONY: nccl-plugin
nccl-plugin: $(BUILD)/libnccl-net-inagg.so $(BUILD)/nccl-harness
all: $(BUILD)/libnccl-net-inagg.so $(BUILD)/nccl-harness

$(BUILD)/nccl/%.pic.o: src/apps/nccl/%.c $(wildcard src/apps/nccl/*.h) include/inagg.h include/inagg/version.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(NCCL_CUDA_CFLAGS) -fPIC -fvisibility=hidden -c $< -o $@

$(BUILD)/libnccl-net-inagg.so: $(NCCL_PIC) $(WORKER_PIC) src/apps/nccl/nccl_plugin.map
	$(CC) -shared -Wl,--version-script=src/apps/nccl/nccl_plugin.map -Wl,--no-undefined \
	    $(LDFLAGS) -o $@ $(NCCL_PIC) $(WORKER_PIC) $(NCCL_CUDA_LIBS) $(LDLIBS)

$(BUILD)/nccl-harness: tests/nccl_harness.c src/apps/nccl/nccl_abi.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(NCCL_CUDA_CFLAGS) -o $@ $< $(LDFLAGS) -ldl $(NCCL_CUDA_LIBS)

examples: $(BUILD)/examples/allreduce

$(BUILD)/examples/allreduce: examples/allreduce.c $(BUILD)/libinagg.a include/inagg.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libinagg.a $(LDFLAGS) $(LDLIBS)

test-integrations: all
	bash tests/cli_integrations.sh

# What tests/cli_integrations.sh uses beyond the build, from Debian (root): without them its
# cases skip with the package to install. python3-torch comes with tools/setup.
INTEGRATION_DEBS := pkg-config python3-numpy python3-pip gfortran scalapack-mpi-test python3-zfpy python3-mpi4py
.PHONY: integrations-deps
integrations-deps:
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(INTEGRATION_DEBS)
