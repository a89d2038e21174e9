#pragma once
#include "kernels/common/dtype.h"
