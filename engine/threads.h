// The threads every op uses (torch.set_num_threads / torch.get_num_threads). Default:
// KILN_NUM_THREADS if set, else OMP_NUM_THREADS, else all cores. set_num_threads throws
// kiln::Error outside [1, 4096] and takes effect at the next op, on every thread of the process.
// (The kernels' own header, kernels/common/parallel.h, declares the same functions with
// parallel_for; this is the public one.)
#pragma once

namespace kiln {

void set_num_threads(int n);
int get_num_threads();
int num_threads();  // the same as get_num_threads()

}  // namespace kiln
