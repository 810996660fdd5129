/*
 * commands.h - the subcommands of `inagg`. Each lives in its own file, parses its own flags
 * (getopt_long), prints its own --help, and returns a process exit code: 0 success, 1 the
 * work failed (verification, timeout, refused), 2 bad usage.
 */
#ifndef INAGG_CLI_COMMANDS_H
#define INAGG_CLI_COMMANDS_H

int cmd_switch(int argc, char **argv); /* inagg switch */
int cmd_bench_allreduce(int argc, char **argv); /* inagg bench allreduce */
int cmd_bench_udp(int argc, char **argv); /* inagg bench udp: the kernel's UDP ceiling */
int cmd_bench_mac(int argc, char **argv); /* inagg bench mac: the dataplane MACs' cost per core */
int cmd_train(int argc, char **argv); /* inagg train: distributed GLM training */
int cmd_bench_latency(int argc, char **argv); /* inagg bench latency: small allreduces */
int cmd_bench_optimizer(int argc, char **argv); /* inagg bench optimizer: in-switch optimizer */
int cmd_bench_compress(int argc, char **argv); /* inagg bench compress: the codec grid */
int cmd_bench_train(int argc, char **argv); /* inagg bench train: DDP on Fashion-MNIST */
int cmd_model(int argc, char **argv); /* inagg model: argv[0] is the subcommand */
int cmd_top(int argc, char **argv); /* inagg top: a live view of a switch */

#endif /* INAGG_CLI_COMMANDS_H */
