// Was cuda::device_count, now Backend::device_count.
#include "../engine/backend.h"
