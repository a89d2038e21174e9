// The members of a tar archive (plain or gzip-compressed), read from its headers without
// extracting anything, and the check `kiln data fetch` runs on them before it calls tar: every
// member stays inside the folder it is unpacked in.
//   ctest --test-dir build -R io.test_hostile_files
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct TarMember {
  std::string name;  // as stored (GNU long names and pax "path" applied)
  char type = '0';   // the ustar typeflag: '0' file, '5' directory, '1' hard link, '2' symlink, ...
  std::string link;  // the target of a hard link or symlink
  uint64_t size = 0;
};

// Every member of `path` in order. Throws kiln::Error naming the path on a header that is not
// tar (bad checksum, no ustar magic) or an archive that ends inside a member.
std::vector<TarMember> tar_members(const std::string& path);

// Refuses (kiln::Error naming the archive and the member) any member that would land outside the
// folder it is unpacked in or is not a plain file, directory or link: absolute names, ".."
// components, symlinks whose target is absolute or climbs with ".." (so a chain of symlinks can
// only descend), hard links to such names, and devices, FIFOs and other special types.
void check_tar_members(const std::vector<TarMember>& members, const std::string& archive);

}  // namespace kiln
