#pragma once
/// @file saver_common.hpp
/// @brief What the savers that store outside the process (SQLite, PostgreSQL) share: clocks,
/// stored JSON, and the texts of their typed errors (private to checkpoint/src).

#include <stategraph/checkpoint/saver.hpp>
#include <stategraph/core/error.hpp>

#include <boost/json/object.hpp>
#include <boost/json/parse_options.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stategraph::checkpoint::common {

/// What a saver's fast start of a call (its lease and its read sent together) settled: `settled`,
/// the lease is held and `got` is the checkpoint read. Not settled: the lease was not free, or
/// the read must be made again (the lease may be held); `saver::acquire_and_get`'s default
/// (`acquire`, then `get`, the lease given back if the read fails) does the rest.
struct call_start {
    bool settled = false;
    std::optional<checkpoint_tuple> got;
};

/// @brief Milliseconds since the epoch (the savers' clock for leases and cache expiry).
std::int64_t now_ms();
/// @brief `ms` since the epoch as "YYYY-MM-DDTHH:MM:SS.mmmZ".
std::string format_utc(std::int64_t ms);
/// @brief `s` between single quotes, as the savers' messages name things.
std::string quote(std::string_view s);
/// @brief How stored JSON is read back: deep and with any bytes in strings, as it was written.
const boost::json::parse_options& json_options();

/// @brief `corrupt_checkpoint`: "thread 'T' namespace 'N': <detail><where>".
checkpoint_error corrupt(const std::string& thread, const std::string& ns, const std::string& detail,
                         const std::string& where, std::vector<std::string> names);
/// @brief Stored JSON `text` of `what`; throws `corrupt` (as above) when it does not parse.
boost::json::value parse_stored(std::string_view text, const std::string& thread, const std::string& ns,
                                const std::string& what, const std::string& where, std::vector<std::string> names);
/// @brief Adds the values inside one checkpoint row (`bytes`, a codec::encode_inline string) to
/// `st`: their bytes count as values, the bytes that frame them (channel names, lengths) as
/// records. Throws `corrupt` (as above, with `where`) when they cannot be read.
void count_row_values(thread_stats& st, std::string_view bytes, const std::string& thread, const std::string& where);
/// @brief "checkpoint C: pending write of task 'T' (N) to channel 'X'".
std::string write_label(const std::string& checkpoint_id, const pending_write& w);

/// @brief `lease_lost`: this saver (`owner`) lost the thread's lease to `holder` ("" = broken).
checkpoint_error lease_lost(const std::string& thread, const std::string& owner, const std::string& holder,
                            const std::string& where);
/// @brief `thread_busy`: `holder` holds the thread until `expires_ms`.
checkpoint_error thread_busy(const std::string& thread, const std::string& holder, std::int64_t expires_ms,
                             const std::string& where);
/// @brief `thread_exists`: copy_thread's target `to` has data already.
checkpoint_error copy_target_exists(const std::string& from, const std::string& to, const std::string& where);
/// @brief `thread_not_found`: copy_thread's source `from` has no checkpoint.
checkpoint_error copy_source_missing(const std::string& from, const std::string& to, const std::string& where);
/// @brief `checkpoint_not_found`: rewind_thread's target `checkpoint_id` is not a checkpoint of `thread`.
checkpoint_error rewind_target_missing(const std::string& thread, const std::string& checkpoint_id,
                                       const std::string& where);
/// @brief `corrupt_checkpoint` for a node-cache entry that cannot be read back.
checkpoint_error cache_corrupt(const std::string& ns, const std::string& key, const std::string& why,
                               const std::string& where);
/// @brief A node-cache entry's value from its checked JSON text; throws `cache_corrupt`.
boost::json::value cache_value(std::string_view text, const std::string& ns, const std::string& key,
                               const std::string& where);

/// @brief Reads a stored value by (channel, version); nullopt when there is none.
using value_fetch = std::function<std::optional<std::string>(const std::string& channel, const std::string& version)>;
/// @brief Throws the saver's `corrupt_checkpoint` with `detail` about `channel` (never returns).
using corrupt_report = std::function<void(const std::string& detail, const std::string& channel)>;
/// @brief What `prune` keeps for the checkpoints `kept`: every (channel, version) they read, with
/// the versions their appended items extend (`codec::mark_needed`). A value that cannot be read
/// goes to `report` ("checkpoint C: channel 'X' (version V) cannot be read: why"), which throws:
/// nothing is pruned.
std::set<std::pair<std::string, std::string>> values_kept(const std::vector<checkpoint>& kept, const value_fetch& fetch,
                                                          const corrupt_report& report);

/// @brief The last step of `list_threads`: `infos` (newest first, each with its head's id and
/// metadata filled in) matched against `match` and paged by `q` (offset and limit apply to
/// matching threads; without a filter the storage has paged already).
std::vector<thread_info> page_threads(std::vector<thread_info> infos, const thread_query& q,
                                      const boost::json::object* match);

} // namespace stategraph::checkpoint::common
