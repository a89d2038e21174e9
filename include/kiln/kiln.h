// kiln's public API in one include, for programs built against an installed kiln:
//   #include <kiln/kiln.h>
// Installed as <prefix>/include/kiln/kiln.h; the headers it names sit beside it under
// <prefix>/include/kiln/{engine,layers,io,dist,nets,train,kernels/common}, all rooted at kiln/, so a
// program may include one of them instead (#include <kiln/engine/tensor.h>). Only <prefix>/include
// is on a user's include path (the exported target kiln::kiln and kiln.pc): the short names the
// library's own sources use ("engine/tensor.h") are rewritten to "kiln/engine/tensor.h" at install
// (cmake/KilnInstallHeaders.cmake) and do not resolve in user code. What this header reaches, plus
// the dispatcher's extension point (engine/dispatch.h and the op declarations), is what gets
// installed. Kept to the user-facing headers, none of which includes a vendor header: compiling it
// costs about a second.
//   ctest --test-dir build -L e2e -R consumer
#pragma once

#include <iostream>  // std::cout << tensor, as a LibTorch program expects

#include "kiln/build_config.h"  // KILN_VERSION_*, KILN_BUILT_WITH_* (generated at configure time)

// engine: tensors, ops, autograd (custom Functions, gradcheck), optimizers, mixed precision, the
// dispatcher, devices, printing, the profiler, version.
#include "engine/amp.h"
#include "engine/autograd.h"
#include "engine/cuda_runtime.h"
#include "engine/device.h"
#include "engine/dispatch.h"
#include "engine/dtype.h"
#include "engine/error.h"
#include "engine/function.h"
#include "engine/gradcheck.h"
#include "engine/ops/conv.h"
#include "engine/ops/dropout.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/index.h"
#include "engine/ops/linalg.h"
#include "engine/ops/loss.h"
#include "engine/ops/norm.h"
#include "engine/ops/pool.h"
#include "engine/ops/reduce.h"
#include "engine/ops/rnn.h"
#include "engine/ops/shape.h"
#include "engine/ops/softmax.h"
#include "engine/optim.h"
#include "engine/print.h"
#include "engine/profiler.h"
#include "engine/random.h"
#include "engine/scalar.h"
#include "engine/schedule.h"
#include "engine/tensor.h"
#include "engine/threads.h"
#include "engine/version.h"

// layers: Module, ModuleHolder, Sequential, the layer zoo and the initialisers.
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/init.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/module.h"
#include "layers/norm.h"
#include "layers/pool.h"
#include "layers/rnn.h"
#include "layers/shape.h"

// io: data sets, the loader, transforms, checkpoints, safetensors, NumPy files, ONNX.
#include "io/data/dataloader.h"
#include "io/data/dataset.h"
#include "io/data/datasets.h"
#include "io/data/synthetic.h"
#include "io/data/transforms.h"
#include "io/formats/checkpoint.h"
#include "io/formats/npy.h"
#include "io/formats/npz.h"
#include "io/formats/safetensors.h"
#include "io/onnx/onnx.h"

// dist: communicators and synchronous data parallelism.
#include "dist/comm.h"
#include "dist/sync.h"

// nets: the model zoo by name.
#include "nets/zoo.h"

// train: the Trainer.
#include "train/trainer.h"
