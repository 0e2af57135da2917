// Opening files that the launcher writes (often as root) in directories it does not control,
// without following symlinks planted by others.
//
// Every component is resolved from "/" with openat2(RESOLVE_NO_SYMLINKS), so no symlink is
// followed anywhere in the path, and every directory on the way is checked like ssh's
// StrictModes: it must be owned by root or the caller, and not writable by group (other than
// root's) or others unless it is sticky (/tmp). A directory failing that is refused with a
// message naming it: whoever can write there could swap a file or directory for a symlink
// between any check and any use.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

#include "sandboxrun/fd.hpp"

namespace sandboxrun {

// The directory `dir` (made absolute, lexically normalised), opened O_RDONLY | O_DIRECTORY
// (usable for fsync and the *at calls). With `create`, missing components are created: the last
// one `mode`, parents 0755. Throws Error naming the offending component.
UniqueFd open_trusted_dir(const std::filesystem::path& dir, bool create = false, mode_t mode = 0700);

// Opens `name`, one component, in a directory from open_trusted_dir, with O_NOFOLLOW and
// O_CLOEXEC added to `flags` (which may hold O_CREAT, O_EXCL, O_APPEND ...; `mode` for creation).
// Only a regular file is accepted; opened for writing, it must also be owned by root or the
// caller and have one link (not another user's file, or a hard link to a victim, planted in a
// sticky directory). `shown` names the file in errors.
UniqueFd open_trusted_at(int dir_fd, const std::string& name, int flags, mode_t mode,
                         const std::filesystem::path& shown);

// open_trusted_dir(parent of path, create_parent) then open_trusted_at(file name).
UniqueFd open_trusted_file(const std::filesystem::path& path, int flags, mode_t mode = 0600,
                           bool create_parent = false);

// 16 random hex digits, for temporary names in such a directory that no other writer (or a
// crashed one) can hold.
std::string random_name_suffix();

}  // namespace sandboxrun
