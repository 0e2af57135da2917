// Blocks and loops: which calls repeat without end (a `while True:` with no way out, a function
// that calls itself with no return), and what an endless loop waits for each pass.
#include <utility>

#include "analyzer_impl.hpp"
#include "internal.hpp"

namespace sandboxrun::assess::detail {

void Analyzer::push_block(Block&& b) {
  bind_params(b);
  if (blocks_.size() < kMaxBlocks) blocks_.push_back(std::move(b));
  else ++block_overflow_;
}

void Analyzer::pop_block() {
  if (block_overflow_ > 0) {
    --block_overflow_;
    return;
  }
  if (blocks_.empty()) return;
  Block b = std::move(blocks_.back());
  blocks_.pop_back();
  forget_params(b);
  const bool endless = (b.kind == BlockKind::loop && b.header_unbounded && !b.exits) ||
                       (b.kind == BlockKind::function && b.recursive && !b.exits);
  if (endless || b.kind == BlockKind::function) {
    // A function body runs when called, not where it is defined: its calls stop here.
    for (auto& d : b.pending) emit_deferred(d, endless, endless && b.waits);
    return;
  }
  // A bounded loop inside an endless one still repeats without end: hand the calls out.
  if (Block* outer = candidate()) {
    for (auto& d : b.pending) {
      if (outer->pending.size() < kMaxPending) outer->pending.push_back(std::move(d));
      else emit_deferred(d, outer->header_unbounded, outer->header_unbounded && outer->waits);
    }
  } else {
    for (auto& d : b.pending) emit_deferred(d, false, false);
  }
}

Block* Analyzer::candidate() {
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it)
    if (it->kind != BlockKind::plain) return &*it;
  return nullptr;
}

void Analyzer::emit_deferred(const Deferred& d, bool endless, bool waiting) {
  sink_.on_call(CallEvent{d.qual, d.line, d.args, endless, false, d.from_decoded, waiting});
}

// break: leaves the innermost loop. return: leaves every loop up to the function.
void Analyzer::mark_exit(bool is_return) {
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) {
    if (it->kind == BlockKind::loop) {
      it->exits = true;
      if (!is_return) return;
    } else if (it->kind == BlockKind::function) {
      if (is_return) it->exits = true;
      return;
    }
  }
}

// What the innermost loop waits for each pass: an awaited queue, task or stream (not a sleep),
// a connection, a datagram, a line. Such a loop is a server or a consumer (CallEvent::waiting_loop).
void Analyzer::note_wait(std::string_view qual) {
  const bool awaited = std::exchange(await_pending_, false) && qual != "asyncio.sleep";
  // A parent that waits for its child each pass (os.waitpid) runs one at a time.
  if (!awaited && qual != "input" && !qual.ends_with(".accept") && !qual.ends_with(".recv") &&
      !qual.ends_with(".recvfrom") && !qual.ends_with(".recv_into") && !qual.ends_with(".readline") &&
      qual != "os.waitpid" && qual != "os.wait" && qual != "os.wait3" && qual != "os.wait4" &&
      qual != "multiprocessing.Process().join")
    return;
  for (auto it = blocks_.rbegin(); it != blocks_.rend() && it->kind != BlockKind::function; ++it)
    if (it->kind == BlockKind::loop) {
      it->waits = true;
      return;
    }
}

}  // namespace sandboxrun::assess::detail
