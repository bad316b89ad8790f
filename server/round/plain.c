/* The plain round kind (shape.h): update mode 1, the FedAvg family. The
 * cohort's members send sealed updates (SubmitUpdate, submit.c), each
 * folded into the model's aggregator by its cohort slot (job/model.h), and
 * the aggregation ends the fold. Everything it does is what the training
 * kinds share (shape.c); its own step is the aggregator's end. */
#include "coord_int.h"
#include "round/shape.h"

static int plain_open(coord_job_t *j)
{
    return coord_model_begin(&j->model, j->rnd.nmembers);
}

static int plain_task(const coord_job_t *j, sfl_task_t *t, sfl_msg_sa_round_t *sa, uint32_t g)
{
    (void)sa, (void)g;
    return coord_shape_task_global(j, t);
}

static int plain_end(coord_job_t *j)
{
    return coord_model_end(&j->model);
}

static int plain_fold(coord_job_t *j)
{
    return coord_shape_fold_model(j, plain_end);
}

const coord_shape_t coord_shape_plain = {
    .name = "plain",
    .free = coord_shape_nop,
    .plan = coord_shape_plan_train,
    .load = coord_shape_nop_load,
    .model = coord_shape_nop_model,
    .ineligible = coord_shape_rows,
    .cohort = coord_shape_nop_cohort,
    .admit = coord_shape_nop_admit,
    .draw = coord_shape_nop_draw,
    .open = plain_open,
    .ntasks = coord_shape_one_task,
    .task_of = coord_shape_task_zero,
    .task = plain_task,
    .start = coord_shape_nop_start,
    .sync = coord_shape_nop,
    .resend = coord_shape_nop_resend,
    .limits = coord_shape_limits_model,
    .check = coord_shape_check_model,
    .add = coord_shape_add_model,
    .record = coord_shape_nop,
    .fold = plain_fold,
    .commit = coord_shape_commit_model,
    .settle = coord_shape_nop_settle,
    .close = coord_shape_nop,
    .committed = coord_shape_committed_model,
    .failed = coord_shape_failed_model,
    .status = coord_shape_nop_status,
};
