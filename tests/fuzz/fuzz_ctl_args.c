/* libFuzzer entry point for sflctl's argument parser (ctl_args_parse, then
 * ctl_args_apply onto a default configuration): the input is argv[1..],
 * one argument per NUL-separated piece. A usage error must say why. Built
 * with libsfl and libcoord (-Ilibsfl/include -Ilibsfl/src -Iserver). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *argv[MAX_ARGS + 2], *copy;
    static ctl_args_t args;
    ctl_config_t c;
    int argc = 1, rc;

    if ((copy = malloc(size + 1)) == NULL)
        return 0;
    memcpy(copy, data, size);
    copy[size] = '\0';
    argv[0] = "sflctl";
    for (size_t i = 0; i < size && argc <= MAX_ARGS; i += strlen(copy + i) + 1)
        argv[argc++] = copy + i;
    argv[argc] = NULL;
    sfl__clear_error();
    rc = ctl_args_parse(argc, argv, &args);
    if (rc < 0 && sfl_last_error()[0] == '\0')
        __builtin_trap();
    if (rc == 0 && !args.help && !args.version) {
        if ((int)args.cmd < CTL_CMD_STATUS || args.cmd > CTL_CMD_LAST ||
            args.noperands > CTL_MAX_OPERANDS || args.nflags > CTL_MAX_FLAGS)
            __builtin_trap();
        for (int i = 0; i < args.noperands; i++)
            if (args.operands[i] == NULL)
                __builtin_trap();
        ctl_config_default(&c);
        if (ctl_args_apply(&args, &c) == 0)
            (void)ctl_config_check(&c);
    }
    free(copy);
    return 0;
}
