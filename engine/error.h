// Re-exports kiln::Error and KILN_CHECK (defined at the kernels floor, which throws them too).
#pragma once
#include "kernels/common/error.h"
