#include "ReactiveUVThreadLocal.h"

__thread void *reactiveuv_tls_current_scheduler = 0;
__thread void *reactiveuv_tls_current_loop = 0;
