#include "sfl/core/version.h"

const char *sfl_version(void)
{
    return SFL_VERSION;
}
