// Training checkpoints: a set of three files per checkpoint prefix P
//   P.safetensors        the model's state_dict (any safetensors reader loads it)
//   P.optim.safetensors  the optimizer's state tensors (momenta, Adam moments, ...)
//   P.json               the sidecar: {"format": "kiln-checkpoint", "version": 1, "step": ...,
//                        "weights": {"file", "bytes", "sha256"}, "optimizer": {...}, "state": {...}}
// Each file is written to a temporary name, fsynced and renamed; the sidecar goes last and names
// the sha256 of the other two, so a set is complete exactly when its sidecar exists and the hashes
// match. A kill at any point leaves the previous checkpoints loadable. Give each checkpoint its own
// prefix (e.g. "ckpt-000100"): overwriting one prefix in place has a window in which its old sidecar
// no longer matches its new tensor files (load_checkpoint then refuses it; latest_checkpoint skips
// it and returns an older set).
//   ctest --test-dir build -R io.test_checkpoint
#pragma once

#include <string>
#include <vector>

#include "layers/module.h"

namespace kiln {

struct Checkpoint {
  NamedTensors weights;    // model state_dict
  NamedTensors optimizer;  // optimizer state tensors
  // The trainer's JSON (model name, optimizer hyper-parameters, step, epoch, schedule, RNG states,
  // ...): opaque here, but it must be a JSON object. Its "step" (an integer), when present, orders
  // checkpoints for latest_checkpoint. Loaded back re-serialised (same JSON value, compact text).
  std::string state_json = "{}";
};

// Writes the set for `prefix` (its directory must exist). Throws kiln::Error naming the file on
// any failure, leaving no partial file under a final name.
void save_checkpoint(const std::string& prefix, const Checkpoint& ckpt);

// `prefix_or_json`: P or P.json. Verifies sizes and sha256s; a missing, truncated, corrupt or
// mismatched file throws kiln::Error naming it.
Checkpoint load_checkpoint(const std::string& prefix_or_json);

// The sidecar path (P.json) of the newest complete, verified checkpoint in `dir` by the step its
// sidecar records (ties: the newer sidecar), or "" if there is none. Temporary files are ignored.
std::string latest_checkpoint(const std::string& dir);

// The sidecar paths (P.json) of every checkpoint set in `dir`, whatever run wrote it, oldest
// written first (ties: the lower step). Sidecars are parsed, not verified: a set whose tensor
// files are damaged is still listed, so pruning removes it too. Temporary files are ignored.
std::vector<std::string> list_checkpoints(const std::string& dir);

// Deletes the files of checkpoint `prefix_or_json` (P.json, P.safetensors, P.optim.safetensors);
// files already gone are no error.
void remove_checkpoint(const std::string& prefix_or_json);

}  // namespace kiln
