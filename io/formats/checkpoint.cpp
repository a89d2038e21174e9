// Checkpoint sets (weights, optimizer state, JSON sidecar); see io/formats/checkpoint.h.
//   ctest --test-dir build -R io.test_checkpoint
#include "io/formats/checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "io/formats/digest.h"
#include "io/formats/json_limits.h"
#include "io/formats/safetensors.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

std::string sidecar_path(const std::string& prefix_or_json) {
  const std::string ext = ".json";
  if (prefix_or_json.size() > ext.size() &&
      prefix_or_json.compare(prefix_or_json.size() - ext.size(), ext.size(), ext) == 0)
    return prefix_or_json;
  return prefix_or_json + ext;
}

Json file_entry(const std::string& path) {
  std::error_code ec;
  const auto bytes = fs::file_size(path, ec);
  KILN_CHECK(!ec, "save_checkpoint: cannot stat '", path, "': ", ec.message());
  return Json{{"file", fs::path(path).filename().string()},
              {"bytes", uint64_t(bytes)},
              {"sha256", io::file_digest_hex("sha256", path)}};
}



// The sidecar, checked where it enters: a regular file (a FIFO would block the reader), JSON
// nested no deeper than io::kMaxJsonDepth (a deeper value overflows the stack when re-serialised),
// and every field kiln uses of the right type and range. Errors name the file, the key and the value.
Json read_sidecar(const std::string& path) {
  std::string text;
  try {
    text = io::read_text_file(path, "checkpoint sidecar", uint64_t(16) << 20);
  } catch (const Error& e) {
    KILN_THROW("checkpoint '", path, "': cannot open the sidecar: ", e.message().empty() ? std::string(e.what()) : e.message());
  }
  io::check_json_depth(text, "checkpoint '" + path + "'");
  Json j = Json::parse(text, nullptr, false);
  KILN_CHECK(!j.is_discarded() && j.is_object(), "checkpoint '", path, "': the sidecar is not valid JSON");
  KILN_CHECK(j.contains("format") && j["format"].is_string() && j["format"].get<std::string>() == "kiln-checkpoint",
             "checkpoint '", path, "': not a kiln checkpoint sidecar (no \"format\": \"kiln-checkpoint\")");
  for (const char* key : {"weights", "optimizer"}) {
    KILN_CHECK(j.contains(key) && j[key].is_object() && j[key].contains("file") && j[key]["file"].is_string() &&
                   j[key].contains("sha256") && j[key]["sha256"].is_string() && j[key].contains("bytes") &&
                   j[key]["bytes"].is_number_unsigned(),
               "checkpoint '", path, "': the sidecar's \"", key, "\" entry is missing or malformed");
    KILN_CHECK(io::is_hex_digits(j[key]["sha256"].get<std::string>(), 64), "checkpoint '", path, "': \"", key,
               ".sha256\" is ", io::clip_json(j[key]["sha256"]), ", not 64 hex digits");
  }
  if (j.contains("step"))
    KILN_CHECK(j["step"].is_number_integer() && j["step"].get<int64_t>() >= 0, "checkpoint '", path,
               "': \"step\" is ", io::clip_json(j["step"]), ", not an integer >= 0");
  KILN_CHECK(j.contains("state") && j["state"].is_object(), "checkpoint '", path,
             "': the sidecar has no \"state\" object");
  return j;
}

// The tensor file an entry names, checked against its recorded size and sha256.
std::string verified_file(const std::string& sidecar, const Json& entry) {
  const std::string name = entry["file"].get<std::string>();
  KILN_CHECK(name.find('/') == std::string::npos, "checkpoint '", sidecar, "': file name '", name,
             "' must not contain '/'");
  const std::string path = (fs::path(sidecar).parent_path() / name).string();
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  KILN_CHECK(fs::exists(st), "checkpoint '", sidecar, "': '", path, "' is missing");
  KILN_CHECK(fs::is_regular_file(st), "checkpoint '", sidecar, "': '", path, "' is not a regular file");
  const auto bytes = fs::file_size(path, ec);
  KILN_CHECK(!ec, "checkpoint '", sidecar, "': '", path, "' cannot be read: ", ec.message());
  KILN_CHECK(bytes == entry["bytes"].get<uint64_t>(), "checkpoint '", sidecar, "': '", path, "' has ", bytes,
             " bytes, the sidecar records ", entry["bytes"].get<uint64_t>(), " (truncated or replaced)");
  const std::string sha = io::file_digest_hex("sha256", path);
  KILN_CHECK(sha == entry["sha256"].get<std::string>(), "checkpoint '", sidecar, "': sha256 of '", path,
             "' is ", sha, ", the sidecar records ", entry["sha256"].get<std::string>(),
             " (corrupt, or from another checkpoint)");
  return path;
}

}  // namespace

void save_checkpoint(const std::string& prefix, const Checkpoint& ckpt) {
  Json state = Json::parse(ckpt.state_json, nullptr, false);
  KILN_CHECK(!state.is_discarded() && state.is_object(), "save_checkpoint '", prefix,
             "': state_json must be a JSON object");
  const std::string weights = prefix + ".safetensors";
  const std::string optim = prefix + ".optim.safetensors";
  save_safetensors(weights, ckpt.weights, {{"format", "pt"}});
  save_safetensors(optim, ckpt.optimizer);
  Json side = Json::object();
  side["format"] = "kiln-checkpoint";
  side["version"] = 1;
  if (state.contains("step") && state["step"].is_number_integer()) side["step"] = state["step"];
  side["weights"] = file_entry(weights);
  side["optimizer"] = file_entry(optim);
  side["state"] = state;
  io::write_file_atomic(sidecar_path(prefix), side.dump(2) + "\n");
}

// Where a checkpoint is not: the directory looked in and the sidecars it does hold.
[[noreturn]] void no_checkpoint(const std::string& given, const std::string& sidecar) {
  const fs::path dir = fs::path(sidecar).parent_path().empty() ? fs::path(".") : fs::path(sidecar).parent_path();
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    KILN_THROW("load_checkpoint('", given, "'): directory '", dir.string(), "' does not exist");
  std::vector<std::string> held;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    std::error_code entry_ec;
    if (e.is_regular_file(entry_ec) && e.path().extension() == ".json" && name.find(".tmp.") == std::string::npos)
      held.push_back(name);
  }
  std::sort(held.begin(), held.end());
  std::string list;
  for (size_t i = 0; i < held.size() && i < 8; ++i) list += (i ? ", " : "") + held[i];
  if (held.size() > 8) list += ", ... (" + std::to_string(held.size()) + " in all)";
  KILN_THROW("load_checkpoint('", given, "'): no sidecar '", fs::path(sidecar).filename().string(), "' in directory '",
             dir.string(), "' (a checkpoint is <prefix>.json beside its .safetensors files; ",
             held.empty() ? std::string("the directory holds no .json file") : "it holds " + list, ")");
}

Checkpoint load_checkpoint(const std::string& prefix_or_json) {
  KILN_CHECK(!prefix_or_json.empty(), "load_checkpoint: the path is empty (latest_checkpoint(dir) returns \"\" when "
             "the directory holds no complete checkpoint)");
  const std::string sidecar = sidecar_path(prefix_or_json);
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(sidecar, ec))) no_checkpoint(prefix_or_json, sidecar);
  Json j = read_sidecar(sidecar);
  Checkpoint c;
  c.weights = load_safetensors(verified_file(sidecar, j["weights"]));
  c.optimizer = load_safetensors(verified_file(sidecar, j["optimizer"]));
  c.state_json = j["state"].dump();
  return c;
}

namespace {

struct Candidate {
  int64_t step;
  fs::file_time_type mtime;
  std::string path;
};

// Every parseable checkpoint sidecar in `dir` (not verified), in directory order.
std::vector<Candidate> scan_sidecars(const std::string& dir) {
  std::vector<Candidate> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    std::error_code entry_ec;
    if (!e.is_regular_file(entry_ec) || e.path().extension() != ".json" || name.find(".tmp.") != std::string::npos)
      continue;
    try {
      Json j = read_sidecar(e.path().string());
      int64_t step = j.contains("step") && j["step"].is_number_integer() ? j["step"].get<int64_t>() : -1;
      found.push_back({step, e.last_write_time(entry_ec), e.path().string()});
    } catch (const Error&) {
      // Not a checkpoint sidecar (another JSON file), or a damaged one: not a candidate.
    }
  }
  return found;
}

}  // namespace

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<Candidate> found = scan_sidecars(dir);
  std::sort(found.begin(), found.end(), [](const Candidate& a, const Candidate& b) {
    return a.mtime != b.mtime ? a.mtime < b.mtime : a.step < b.step;
  });
  std::vector<std::string> paths;
  for (const Candidate& c : found) paths.push_back(c.path);
  return paths;
}

void remove_checkpoint(const std::string& prefix_or_json) {
  const std::string sidecar = sidecar_path(prefix_or_json);
  const std::string prefix = sidecar.substr(0, sidecar.size() - 5);
  // The sidecar first: without it the set is no longer a checkpoint, whatever is left.
  for (const std::string& f : {sidecar, prefix + ".safetensors", prefix + ".optim.safetensors"}) {
    std::error_code ec;
    fs::remove(f, ec);
  }
}

std::string latest_checkpoint(const std::string& dir) {
  std::vector<Candidate> found = scan_sidecars(dir);
  std::sort(found.begin(), found.end(), [](const Candidate& a, const Candidate& b) {
    return a.step != b.step ? a.step > b.step : a.mtime > b.mtime;
  });
  for (const auto& c : found) {
    try {
      Json j = read_sidecar(c.path);
      verified_file(c.path, j["weights"]);
      verified_file(c.path, j["optimizer"]);
      return c.path;
    } catch (const Error&) {
      // Incomplete or overwritten set: fall back to the next older one.
    }
  }
  return "";
}

}  // namespace kiln
