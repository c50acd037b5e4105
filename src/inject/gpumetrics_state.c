/* The sampler's state (gpumetrics_state.h), defined apart from the files that use it so that
 * gpumetrics.c and gpumetrics_metrics.c both depend on it and not on each other. */
#include "inject/gpumetrics.h"
#include "inject/gpumetrics_state.h"

struct gm_sampler_state gm_sampler = {.lock = PTHREAD_MUTEX_INITIALIZER,
                                      .cond = PTHREAD_COND_INITIALIZER,
                                      .started = PTHREAD_COND_INITIALIZER,
                                      .clock = -1};
