// The emulated device's cuda_runtime.h: the runtime API (cuda_runtime_api.h beside it).
#pragma once
#include "cuda_runtime_api.h"
