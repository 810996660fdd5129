# Makefile - builds inagg: the library, the `inagg` command, the tests, the MPI baseline.
#
#   make            release build into build/
#   make SAN=1      ASan+UBSan build into build-san/
#   make test       build and run the test suite (tests/run)
#
# Warnings are errors. Sources are found by directory, so a new module needs no edit here.

CC      ?= cc
SAN     ?= 0
ifeq ($(SAN),1)
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
LDFLAGS := -pthread $(LDSAN)
LDLIBS  := -lm

LIB_SRC := $(wildcard src/base/*.c src/kernels/*.c src/json/*.c src/mpi/baseline_mpi.c src/wire/*.c \
                      src/transport/*.c src/control/*.c src/switch/*.c src/worker/*.c src/glm/*.c src/launch/*.c)
CLI_SRC := $(wildcard src/cli/*.c)
TEST_SRC := $(wildcard tests/test_*.c)

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o) $(BUILD)/tests/harness.o $(BUILD)/tests/testutil.o

MPICC := $(shell command -v mpicc 2>/dev/null)

.PHONY: all test clean san
all: $(BUILD)/inagg $(BUILD)/inagg-tests $(BUILD)/libinagg.a $(if $(MPICC),$(BUILD)/inagg-mpi-bench $(BUILD)/inagg-mpi-train)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libinagg.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/inagg: $(CLI_OBJ) $(BUILD)/libinagg.a
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/libinagg.a $(LDLIBS)

$(BUILD)/inagg-tests: $(TEST_OBJ) $(BUILD)/libinagg.a
	$(CC) $(LDFLAGS) -o $@ $(TEST_OBJ) $(BUILD)/libinagg.a $(LDLIBS)

# The MPI baseline is its own program: it links OpenMPI, which the library never does.
$(BUILD)/inagg-mpi-bench: src/mpi/mpi_allreduce_bench.c src/json/json.c src/json/json.h
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS_BASE) -O3 -o $@ src/mpi/mpi_allreduce_bench.c src/json/json.c -lm

# The MPI trainer: the glm trainers over MPI; links the glm sources, never libinagg.
GLM_MPI_SRC := $(filter-out src/glm/coll_inagg.c,$(wildcard src/glm/*.c))
$(BUILD)/inagg-mpi-train: src/mpi/mpi_train.c $(GLM_MPI_SRC) $(wildcard src/glm/*.h) src/json/json.c src/json/json.h src/kernels/optim.c src/kernels/optim.h
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS_BASE) -O3 -o $@ src/mpi/mpi_train.c $(GLM_MPI_SRC) src/json/json.c src/kernels/optim.c -lm

test: all
	bash tests/run

san:
	$(MAKE) SAN=1

clean:
	rm -rf build build-san

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_OBJ:.o=.d)
