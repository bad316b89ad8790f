/* The Admin service (admin.c).
 * On the loop thread unless said otherwise. */
#ifndef COORD_SERVICE_ADMIN_H
#define COORD_SERVICE_ADMIN_H

#include "coord_int.h"

uint32_t coord_connected_agents(const coord_t *co);
void coord_h_status(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_list_agents(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_list_jobs(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_create_job(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_pause(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_resume(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_cancel(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_export(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_history(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_revoke(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
/* admin.c: JobStatus of job j, as Status and ListJobs answer it. */
void coord_job_status(const coord_job_t *j, sfl_job_status_t *st);

#endif
