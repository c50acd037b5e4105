/* The session's shared state (collect_state.h), defined apart from the files that use it: the
 * life cycle, the buffers, the callbacks, the output and the windows all depend on it, and
 * none of them on another through it. */
#include "inject/collect_state.h"

static struct collect_session session = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .attach_lock = PTHREAD_MUTEX_INITIALIZER,
    .sigpipe = {-1, -1},
    .startend = {.lock = PTHREAD_MUTEX_INITIALIZER},
    .win = {.lock = PTHREAD_MUTEX_INITIALIZER,
            .changed = PTHREAD_COND_INITIALIZER,
            .wake = {-1, -1}},
};

struct collect_session *const collect_process_session = &session;
