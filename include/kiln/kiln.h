// kiln's public API in one include, for programs built against an installed kiln:
//   #include <kiln/kiln.h>
// Installed as <prefix>/include/kiln/kiln.h; the headers it names sit beside it under
// <prefix>/include/kiln/{engine,layers,io,dist,nets,train,kernels/common} and are reached by the
// same relative paths the library uses ("engine/tensor.h"), so a program may include those
// directly instead (the exported target kiln::kiln and kiln.pc put both <prefix>/include and
// <prefix>/include/kiln on the include path). Kept to the user-facing headers, none of which
// includes a vendor header: compiling it costs about a second.
//   ctest --test-dir build -L e2e -R consumer
#pragma once

#include "kiln/build_config.h"  // KILN_VERSION_*, KILN_BUILT_WITH_* (generated at configure time)

// engine: tensors, ops, autograd, optimizers, the dispatcher, devices, version.
#include "engine/autograd.h"
#include "engine/cuda_runtime.h"
#include "engine/device.h"
#include "engine/dispatch.h"
#include "engine/dtype.h"
#include "engine/error.h"
#include "engine/ops/conv.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/linalg.h"
#include "engine/ops/loss.h"
#include "engine/ops/norm.h"
#include "engine/ops/pool.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "engine/optim.h"
#include "engine/random.h"
#include "engine/schedule.h"
#include "engine/tensor.h"
#include "engine/version.h"

// layers: Module, Sequential and the layer zoo.
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/module.h"
#include "layers/norm.h"
#include "layers/pool.h"
#include "layers/shape.h"

// io: data sets, the loader, transforms, checkpoints.
#include "io/formats/checkpoint.h"
#include "io/data/dataloader.h"
#include "io/data/dataset.h"
#include "io/data/datasets.h"
#include "io/data/synthetic.h"
#include "io/data/transforms.h"

// dist: communicators and synchronous data parallelism.
#include "dist/comm.h"
#include "dist/sync.h"

// nets: the model zoo by name.
#include "nets/zoo.h"

// train: the Trainer.
#include "train/trainer.h"
