// The data-set catalogue and the shared data directory behind `kiln data list|fetch|verify`.
//
// Each data set lives in <data root>/<name>/ with its files under the names the publisher uses.
// The data root is $KILN_DATA, else $HOME/.cache/kiln/data. A centre stores each data set once for
// all users by pointing KILN_DATA at a shared file system (e.g. in a module file or /etc/profile.d:
// `export KILN_DATA=/shared/datasets/kiln`), fetching there once as a data manager (with a umask
// of 002/022 so users can read), and letting users read it. find_dataset() also looks in
// /usr/share/datasets/<name>, where Debian's dataset-* packages install.
//
// The built-in catalogue (mnist, fashion-mnist, cifar-10, cifar-100, imagenet-ilsvrc2012) can be
// extended or overridden by a JSON file named by $KILN_CATALOGUE: {"datasets": [entry, ...]} with
// the fields of DatasetInfo (files: name, url, bytes, md5, sha256, content_md5, content_sha256).
// Each entry is checked as it is read: names of letters, digits and . _ - + (no '/', no ".."),
// http(s) URLs, hex sums of the right length, "extract" one of the entry's files, "data_subdir"
// a relative path inside the data set; a violation throws naming the file, the entry and the value.
//   ctest --test-dir build -R io.test_catalogue
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln {

struct DataFile {
  std::string name;  // file name inside the data set's directory
  std::string url;   // where the publisher serves it ("" for manual downloads)
  int64_t bytes = -1;
  std::string md5, sha256;  // of the file as published (either or both; "" unknown)
  // For .gz files: digests of the decompressed bytes, accepted in place of md5/sha256 for copies a
  // distribution recompressed (Debian's Fashion-MNIST differs from upstream only in gzip headers).
  std::string content_md5, content_sha256;
};

struct DatasetInfo {
  std::string name, description, size, licence, citation, homepage;
  bool manual = false;     // the licence requires a manual, registered download
  std::string manual_note; // how to get it, for `kiln data fetch` to print
  std::string extract;     // after fetching: a tar file to unpack in place ("" none)
  std::string data_subdir; // where the reader's files are, relative to the data set's directory
  std::vector<DataFile> files;
};

// Built-in entries, then $KILN_CATALOGUE's (replacing a built-in of the same name). A malformed
// user catalogue throws kiln::Error naming the file.
std::vector<DatasetInfo> catalogue();
// The entry named `name`; unknown names throw kiln::Error listing the known ones.
DatasetInfo catalogue_entry(const std::string& name);

// $KILN_DATA, else $HOME/.cache/kiln/data.
std::string data_root();
// The directory of an installed data set (its data_subdir when it has one): data_root()/name, then
// /usr/share/datasets/name. Installed means every catalogue file is present (or the data_subdir of
// an extracted archive); names not in the catalogue are found when their directory exists. "" if none.
std::string find_dataset(const std::string& name);

struct FetchOptions {
  // "" : each file's catalogue URL. A directory (path or file://): each file by name inside it.
  // A URL or path ending in '/': the base of each file. Otherwise one file (one-file data sets).
  std::string from;
  std::string dir;  // destination; default data_root()/name
  std::function<void(const std::string&)> log;  // progress messages (optional)
};
// Fetches every file of data set `name` not already present and verified: into <file>.part,
// resuming from its size when it exists, verified against the catalogue sums before the rename to
// the final name (a mismatch removes the .part and throws naming the file). http(s) sources go
// through `curl -C -` (http and https only, redirects too); file:// and paths are copied natively.
// Nothing is written outside the data set's folder: catalogue names are single path components,
// the default folder must resolve inside data_root() (a symlink out is refused), a planted .part
// symlink is removed, and an archive's members are listed and checked (tar_members.h) before tar
// unpacks it. Returns the destination directory.
std::string fetch_dataset(const std::string& name, const FetchOptions& opt = {});

struct FileCheck {
  std::string file;
  bool ok = false;
  std::string detail;  // "md5 ok", "missing", "sha256 mismatch: ...", "size only (..)"
};
// Checks every file of `name` in `dir` (default: where find_dataset or data_root() puts it):
// size and md5/sha256. Files over 4 GiB are checked by size only unless `full`.
std::vector<FileCheck> verify_dataset(const std::string& name, const std::string& dir = "", bool full = false);

// Checks one file against its entry (what fetch and verify use): every sum listed must match
// (md5 and sha256 both, when both are given); a .gz whose published sums differ passes when every
// listed content_* sum of its decompressed bytes matches (a recompressed copy).
FileCheck check_file(const DataFile& f, const std::string& path, bool full = true);

}  // namespace kiln
