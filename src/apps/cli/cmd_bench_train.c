/*
 * cmd_bench_train.c - `inagg bench train`: data-parallel training of a Fashion-MNIST network
 * (PyTorch DDP) through Gloo and through inagg, on loopback or one rank per host of a testbed
 * with rate-limited links. The training is torch's, so the work is done by the documented
 * script bench/train_ddp.py (its --help is this command's); this command finds it and Debian's
 * python3 and replaces itself with them, passing every option on and naming this binary in
 * $INAGG_BIN so the script runs the same build's switch.
 *
 * $INAGG_TRAIN_SCRIPT overrides the script (default ../bench/train_ddp.py beside this binary),
 * $INAGG_PYTHON the interpreter (default /usr/bin/python3, which has python3-torch).
 * Exit: the script's (0 done, 1 a run failed, 2 bad usage, 3 torch, the dataset or testbeds
 * unavailable); 3 also when the script or the interpreter cannot be found.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/cli/commands.h"
#include "apps/launch/launch.h"

#define TRAIN_CMD "inagg bench train"
#define TRAIN_MAX_ARGS 256

int cmd_bench_train(int argc, char **argv)
{
    char script[PATH_MAX], self[PATH_MAX];
    const char *env_script = getenv("INAGG_TRAIN_SCRIPT");
    if (env_script && *env_script) {
        snprintf(script, sizeof(script), "%s", env_script);
    } else if (launch_beside_self("../bench/train_ddp.py", script, sizeof(script)) != 0) {
        fprintf(stderr, TRAIN_CMD ": cannot locate this binary's directory to find "
                                  "bench/train_ddp.py (set INAGG_TRAIN_SCRIPT)\n");
        return 3;
    }
    if (access(script, R_OK) != 0) {
        fprintf(stderr, TRAIN_CMD ": %s: %s (set INAGG_TRAIN_SCRIPT)\n", script, strerror(errno));
        return 3;
    }
    const char *python = getenv("INAGG_PYTHON");
    if (!python || !*python)
        python = "/usr/bin/python3";
    if (!launch_is_executable(python)) {
        fprintf(stderr,
                TRAIN_CMD ": %s is not an executable Python interpreter (apt-get "
                          "install python3 python3-torch, or set INAGG_PYTHON)\n",
                python);
        return 3;
    }
    if (argc + 3 > TRAIN_MAX_ARGS) {
        fprintf(stderr, TRAIN_CMD ": too many arguments (at most %d)\n", TRAIN_MAX_ARGS - 3);
        return 2;
    }
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        if (!getenv("INAGG_BIN"))
            setenv("INAGG_BIN", self, 1);
    }
    char *args[TRAIN_MAX_ARGS];
    int k = 0;
    args[k++] = (char *)python;
    args[k++] = script;
    for (int i = 1; i < argc; i++) /* argv[0] is "train" */
        args[k++] = argv[i];
    args[k] = NULL;
    fflush(NULL);
    execv(python, args);
    fprintf(stderr, TRAIN_CMD ": cannot run %s %s: %s\n", python, script, strerror(errno));
    return 3;
}
