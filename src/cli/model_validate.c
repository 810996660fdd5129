/* placeholder replaced below */
#include "cli/model_cli.h"
int model_validate_main(int argc, char **argv) { (void)argc; (void)argv; return 2; }
