// <log>.run-ids: the run ids that the log's records carry, so that a run id which is not new is
// refused without reading the whole log on every run (a 170 MB log took 140 ms per run), and
// atomically: the check and the claim happen under the log's flock, so two runs given the same
// id at the same moment cannot both pass.
//
// The file is append-only. Each line is an id or a mark "@HASH:OFFSET": the log file whose first
// record has hash HASH is indexed up to byte OFFSET. The first record names a file whatever
// rotation calls it and whatever inode it has. A claim reads the index once (a sequential scan:
// 200,000 runs make 6.6 MB), indexes each log file past its mark, then checks the id and appends
// it. A crash can lose only a suffix of the index, and a mark goes with the ids before it, so
// the next claim scans that part of the log again. Ids of pruned log files stay claimed. An
// index damaged past reading (a line longer than any id or mark) is started afresh.
#pragma once

#include <filesystem>
#include <string>

namespace sandboxrun::audit {

std::filesystem::path run_ids_path(const std::filesystem::path& log);  // <log>.run-ids

// Call under the log's exclusive lock. False when a record of the log's files, or an earlier
// claim, has `id`; otherwise records the claim and returns true. Throws Error when the index or
// a log file cannot be read or written.
bool claim_run_id(const std::filesystem::path& log, const std::string& id);

}  // namespace sandboxrun::audit
