// Checkpoints in the safetensors format (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON naming each tensor's dtype, shape and byte range,
// then the raw little-endian data. Writes are atomic (temp file, fsync, rename); reads validate
// every field and throw kiln::Error naming the file and the bad spot, never crash.
//   ctest --test-dir build -R io.test_safetensors
#pragma once

#include <map>
#include <string>

#include "layers/module.h"

namespace kiln {

// Writes `tensors` (any device, any strides; stored contiguous, in the given order) and the
// optional string metadata to `path`, replacing it atomically.
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads every tensor of `path` onto the CPU, in file-offset order. When `metadata` is given it
// receives the "__metadata__" map (empty if absent).
NamedTensors load_safetensors(const std::string& path, std::map<std::string, std::string>* metadata = nullptr);

// state_dict() of `module` to `path`.
void save_module(const Module& module, const std::string& path,
                 const std::map<std::string, std::string>& metadata = {});
// load_state_dict from `path`; strict as in Module::load_state_dict.
void load_module(Module& module, const std::string& path, bool strict = true);

}  // namespace kiln
