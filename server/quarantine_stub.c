/* Stand-in for server/quarantine.c (issue 23, branch sa only; deleted at
 * merge): logs the culprit as one key=value line, so saround.c's calls
 * link and can be seen in the log. The real quarantine keeps the agent out
 * of the job's cohorts until an admin lets it back. */
#include "coord_int.h"

void coord_quarantine(job_t *j, uint64_t agent, const char *reason)
{
    char q[128];

    coord_log(COORD_LOG_WARN, "quarantine", "job=%llu agent=%llu reason=%s",
              (unsigned long long)j->id, (unsigned long long)agent,
              coord_log_quote(reason, q, sizeof(q)));
}
