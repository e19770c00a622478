#include "hangscope/python/async_tasks.h"

#include <algorithm>
#include <array>
#include <set>

#include "hangscope/python/merge.h"

namespace hangscope::python {
namespace {

constexpr std::size_t kMaxSetSlots = std::size_t{1} << 20;  // 1 Mi slots (16 MiB): > max_tasks
constexpr int kMaxTypeDepth = 32;

// What `async for` (__anext__ / asend) and athrow / aclose return: an awaitable that drives its
// async generator, whose frame the chain continues in.
bool is_async_gen_step(std::string_view type) {
  return type == "async_generator_asend" || type == "async_generator_athrow";
}

// "Future" for "_asyncio.Future"; a Python class's name as it is ("_GatheringFuture").
std::string short_type(std::string name) {
  if (const auto dot = name.rfind('.'); dot != std::string::npos) name.erase(0, dot + 1);
  return name;
}

StackReaderOptions frame_options(const AsyncTasksOptions& options) {
  StackReaderOptions frames;
  frames.locals = options.locals;
  return frames;
}

}  // namespace

AsyncTaskReader::AsyncTaskReader(ObjectReader& objects, std::uint64_t runtime_address,
                                 AsyncTasksOptions options)
    : objects_(objects),
      layout_(objects.layout()),
      asyncio_(choose_asyncio_layout(objects.layout(), options.asyncio_debug, layout_notes_)),
      runtime_(runtime_address),
      options_(options),
      frames_(objects, runtime_address, frame_options(options)) {}

std::optional<std::uint64_t> AsyncTaskReader::find_tasks_module() {
  const auto found = objects_.find_modules(runtime_, {kTasksModule});
  if (found.empty()) return std::nullopt;
  return found.begin()->second;
}

std::vector<std::uint64_t> AsyncTaskReader::set_keys(std::uint64_t set) {
  std::vector<std::uint64_t> keys;
  const auto mask = objects_.read_field(set, asyncio_->set_mask);
  const auto table = objects_.read_field(set, asyncio_->set_table);
  if (!mask || !table || *mask < 0 || static_cast<std::uint64_t>(*mask) >= kMaxSetSlots ||
      !objects_.plausible(*table)) {
    return keys;
  }
  const std::size_t slots = static_cast<std::size_t>(*mask) + 1;
  const std::size_t words_per_entry = asyncio_->set_entry_size / 8;
  std::vector<std::uint64_t> entries(slots * words_per_entry);
  if (!objects_.read(*table, entries.data(), entries.size() * 8)) return keys;
  for (std::size_t i = 0; i < slots; ++i) {
    if (const std::uint64_t key = entries[i * words_per_entry]; key != 0) keys.push_back(key);
  }
  return keys;
}

bool AsyncTaskReader::has_base(std::uint64_t object, std::string_view wanted) {
  auto type = objects_.read_field(object, layout_.object_type);
  for (int depth = 0; type && *type != 0 && depth < kMaxTypeDepth; ++depth) {
    if (!objects_.plausible(*type)) return false;
    const auto name_pointer = objects_.read_field(*type, layout_.type_name);
    std::array<char, 32> name{};
    if (!name_pointer || !objects_.read(*name_pointer, name.data(), wanted.size() + 1)) {
      return false;
    }
    if (std::string_view(name.data(), wanted.size()) == wanted && name[wanted.size()] == '\0') {
      return true;
    }
    type = objects_.read_field(*type, asyncio_->type_base);
  }
  return false;
}

bool AsyncTaskReader::is_task(std::uint64_t object) {
  if (!objects_.plausible(object)) return false;
  const auto type = objects_.read_field(object, layout_.object_type);
  if (!type || !objects_.plausible(*type)) return false;
  if (const auto it = task_types_.find(*type); it != task_types_.end()) return it->second;
  return task_types_[*type] = has_base(object, "_asyncio.Task");
}

void AsyncTaskReader::add_registry(std::uint64_t set, bool weak, bool eager,
                                   std::vector<std::uint64_t>& order,
                                   std::map<std::uint64_t, bool>& found) {
  for (const std::uint64_t key : set_keys(set)) {
    if (order.size() >= options_.max_tasks) return;
    std::uint64_t task = key;
    if (weak) {
      const auto referent = objects_.read_field(key, asyncio_->weakref_object);
      if (!referent) continue;
      task = *referent;
    }
    if (!is_task(task)) continue;  // a dead reference, the set's dummy, or no C Task
    const auto [it, fresh] = found.emplace(task, eager);
    if (fresh) {
      order.push_back(task);
    } else if (eager) {
      it->second = true;
    }
  }
}

std::optional<std::uint64_t> AsyncTaskReader::running_loop(std::uint64_t tstate) {
  std::optional<std::uint64_t> loop;
  switch (asyncio_->running_loop) {
    case RunningLoopPlace::kThreadDict: {
      const auto dict = objects_.read_field(tstate, *asyncio_->tstate_dict);
      if (!dict || *dict == 0 || !objects_.plausible(*dict)) return std::nullopt;
      loop = objects_.dict_get(*dict, "__asyncio_running_event_loop__");
      if (loop && asyncio_->running_loop_holder_loop &&
          objects_.type_name(*loop) == "_RunningLoopHolder") {
        loop = objects_.read_field(*loop, *asyncio_->running_loop_holder_loop);
      }
      break;
    }
    case RunningLoopPlace::kThreadState:
      loop = objects_.read_field(tstate, *asyncio_->tstate_running_loop);
      break;
  }
  if (!loop || *loop == 0 || !objects_.plausible(*loop)) return std::nullopt;
  if (objects_.type_name(*loop) == "NoneType") return std::nullopt;
  return loop;
}

std::string AsyncTaskReader::task_name(std::uint64_t name) {
  if (name == 0) return "";
  const auto type = objects_.type_name(name);
  if (type == "str") return objects_.string(name, 256).value_or("");
  // The counter a task keeps until get_name() makes it a str, as asyncio prints it.
  if (type == "int") {
    if (const auto n = objects_.int_value(name)) return "Task-" + std::to_string(*n);
  }
  return "<" + type.value_or("?") + ">";
}

std::uint64_t AsyncTaskReader::stack_depth(std::uint64_t frame) {
  constexpr std::uint64_t kMaxDepth = 100000;
  if (asyncio_->frame_stackpointer) {  // 3.14+: a pointer past the top of localsplus
    const auto pointer = objects_.read_field(frame, *asyncio_->frame_stackpointer);
    const std::uint64_t base = layout_.frame_localsplus.in(frame);
    if (!pointer || *pointer <= base || (*pointer - base) % 8 != 0) return 0;
    const std::uint64_t depth = (*pointer - base) / 8;
    return depth <= kMaxDepth ? depth : 0;
  }
  const auto stacktop = objects_.read_field(frame, *asyncio_->frame_stacktop);
  if (!stacktop || *stacktop <= 0 || static_cast<std::uint64_t>(*stacktop) > kMaxDepth) return 0;
  return static_cast<std::uint64_t>(*stacktop);
}

std::uint64_t AsyncTaskReader::stack_top(std::uint64_t frame) {
  std::optional<std::uint64_t> top;
  switch (asyncio_->coroutine_frame) {
    case CoroutineFrame::kFrameObject: {
      const auto stack = objects_.read_field(frame, *asyncio_->frame_valuestack);
      const auto depth = objects_.read_field(frame, *asyncio_->frame_stackdepth);
      if (!stack || !depth || *depth <= 0 || *depth > 100000) return 0;
      top = objects_.pointer_at(*stack + 8 * static_cast<std::uint64_t>(*depth - 1));
      break;
    }
    case CoroutineFrame::kEmbedded: {
      const std::uint64_t depth = stack_depth(frame);
      if (depth == 0) return 0;
      top = objects_.pointer_at(layout_.frame_localsplus.item(frame, depth - 1));
      break;
    }
  }
  if (top && layout_.stack_refs) *top &= ~std::uint64_t{3};
  return top && objects_.plausible(*top) ? *top : 0;
}

std::uint64_t AsyncTaskReader::yield_from(std::uint64_t gen, std::uint64_t frame, int state) {
  const auto& a = *asyncio_;
  if (state == a.state_created || state >= a.state_executing) return 0;
  switch (a.yield_from) {
    case YieldFromTest::kYieldFromOpcode: {
      const auto lasti = objects_.read_field(frame, *layout_.frame_lasti);
      const auto code = objects_.read_field(gen, *a.gen_code);
      if (!lasti || *lasti < 0 || !code) return 0;
      const auto bytecode = objects_.read_field(*code, *a.code_code);
      if (!bytecode || !objects_.plausible(*bytecode)) return 0;
      const auto size = objects_.var_size(*bytecode);
      const std::int64_t next = (static_cast<std::int64_t>(*lasti) + 1) * 2;
      std::uint8_t opcode = 0;
      if (!size || next >= *size ||
          !objects_.read(layout_.bytes_data.in(*bytecode) + static_cast<std::uint64_t>(next),
                         &opcode, 1) ||
          opcode != a.yield_from_opcode) {
        return 0;
      }
      break;
    }
    case YieldFromTest::kResumeAfterYield: {
      const auto prev = objects_.read_field(frame, *layout_.frame_instr_ptr);
      std::array<std::uint8_t, 2> next{};  // the code unit after prev_instr: opcode, oparg
      if (!prev || !objects_.read(*prev + 2, next.data(), next.size())) return 0;
      const bool resume = std::find(a.resume_opcodes.begin(), a.resume_opcodes.end(), next[0]) !=
                          a.resume_opcodes.end();
      if (!resume || (next[1] & 3) < 2) return 0;  // not after `yield from` / `await`
      break;
    }
    case YieldFromTest::kSuspendedState:
      if (state != a.state_suspended_yield_from) return 0;
      break;
  }
  return stack_top(frame);
}

std::optional<std::pair<std::uint64_t, int>> AsyncTaskReader::generator_frame(std::uint64_t gen) {
  const auto& a = *asyncio_;
  std::uint64_t frame = 0;
  int state = 0;
  switch (a.coroutine_frame) {
    case CoroutineFrame::kFrameObject: {
      const auto pointer = objects_.read_field(gen, *a.gen_frame_object);
      if (!pointer || *pointer == 0) return std::nullopt;  // finished: the frame is gone
      frame = *pointer;
      state = objects_.read_field(frame, *a.frame_object_state).value_or(a.state_executing + 1);
      break;
    }
    case CoroutineFrame::kEmbedded:
      frame = gen + a.gen_iframe;
      state = objects_.read_field(gen, *a.gen_frame_state).value_or(a.state_executing + 1);
      break;
  }
  if (state > a.state_executing) return std::nullopt;  // finished
  return std::make_pair(frame, state);
}

std::uint64_t AsyncTaskReader::follow_chain(std::uint64_t object, std::vector<model::Frame>& frames,
                                            bool* executing, std::vector<std::string>& notes) {
  const auto& a = *asyncio_;
  std::string driven_by;  // the async generator step that led to `object`, if one did
  for (std::size_t depth = 0; depth < options_.max_chain; ++depth) {
    if (!objects_.plausible(object)) return 0;
    const auto type = objects_.type_name(object).value_or("");
    if (type == "_asyncio.FutureIter") {  // `await future`: the future it iterates
      const auto future = objects_.read_field(object, a.future_iter_future);
      return future && objects_.plausible(*future) ? *future : 0;
    }
    if (is_async_gen_step(type)) {  // `async for`, asend, athrow, aclose: the generator it drives
      const auto generator = objects_.read_field(object, a.async_gen_step_gen);
      if (!generator || !objects_.plausible(*generator)) {
        notes.push_back("the async generator of an " + type + " could not be read");
        return object;
      }
      driven_by = type;
      object = *generator;
      continue;
    }
    if (type != "coroutine" && type != "generator" && type != "async_generator") {
      return object;  // another awaitable (an async_generator_wrapped_value, a Python object, …)
    }
    const auto suspended = generator_frame(object);
    if (!suspended) {  // finished: an asend/athrow that is awaited does not drive one
      if (!driven_by.empty()) {
        notes.push_back("the async generator that an " + driven_by + " drives has finished");
      }
      return 0;
    }
    const auto [frame, state] = *suspended;
    driven_by.clear();
    const auto py = frames_.read_frame(frame);
    if (!py) {
      notes.push_back("a coroutine's frame could not be read (" + type + ")");
      return 0;
    }
    frames.push_back(to_frame(*py));
    if (a.gen_qualname) {
      const auto qualname = objects_.read_field(object, *a.gen_qualname);
      if (auto text = qualname ? objects_.string(*qualname, 256) : std::nullopt) {
        frames.back().qualname = std::move(*text);
      }
    }
    if (state == a.state_executing) {
      *executing = true;
      return 0;
    }
    object = yield_from(object, frame, state);
    if (object == 0) return 0;
  }
  notes.push_back("coroutine chain cut after " + std::to_string(options_.max_chain) + " awaits");
  return 0;
}

model::AsyncTask AsyncTaskReader::read_task(std::uint64_t task) {
  const auto& a = *asyncio_;
  model::AsyncTask out;
  out.address = task;
  out.loop = objects_.read_field(task, a.task_loop).value_or(0);
  switch (objects_.read_field(task, a.task_state).value_or(-1)) {
    case 0:
      out.state = model::AsyncTask::State::kPending;
      break;
    case 1:
      out.state = model::AsyncTask::State::kCancelled;
      break;
    case 2:
      out.state = model::AsyncTask::State::kFinished;
      break;
    default:
      out.notes.push_back("unreadable task state");
  }
  out.name = task_name(objects_.read_field(task, a.task_name).value_or(0));
  if (const auto it = current_.find(out.loop); it != current_.end() && it->second == task) {
    out.running = true;
  }
  std::vector<model::Frame> chain;
  bool executing = false;
  std::uint64_t awaited = 0;
  if (const auto coro = objects_.read_field(task, a.task_coro); coro && *coro != 0) {
    awaited = follow_chain(*coro, chain, &executing, out.notes);
  }
  out.running = out.running || executing;
  std::reverse(chain.begin(), chain.end());  // innermost first
  // The future the task's step parked on (task_fut_waiter) is what it waits for; the chain's
  // end names the same object, or the awaitable when the task awaits no future.
  const auto waiter = objects_.read_field(task, a.task_fut_waiter).value_or(0);
  const std::uint64_t target = waiter != 0 && objects_.plausible(waiter) ? waiter : awaited;
  if (target != 0 && out.state == model::AsyncTask::State::kPending) {
    if (is_task(target)) {
      out.awaited_task = target;
    } else if (!chain.empty() && model::in_asyncio(chain.front())) {
      out.awaits = chain.front().qualname;  // "Event.wait", "Queue.get", "sleep", …
    } else {
      out.awaits = short_type(objects_.type_name(target).value_or("?"));
    }
  }
  out.coroutine = std::move(chain);
  return out;
}

void AsyncTaskReader::read_registries(std::uint64_t globals, std::vector<std::uint64_t>& order,
                                      std::map<std::uint64_t, bool>& found, AsyncTasks& out) {
  const auto weak_set = [&](const char* name) -> std::optional<std::uint64_t> {
    const auto object = objects_.dict_get(globals, name);
    if (!object) return std::nullopt;
    return objects_.attribute(*object, "data");  // WeakSet.data: a set of weak references
  };
  if (asyncio_->registry == TaskRegistry::kAllTasks) {
    if (const auto set = weak_set("_all_tasks")) {
      add_registry(*set, true, false, order, found);
    } else {
      out.notes.push_back("asyncio.tasks._all_tasks could not be read");
    }
  } else {
    if (const auto set = weak_set("_scheduled_tasks")) {
      add_registry(*set, true, false, order, found);
    } else {
      out.notes.push_back("asyncio.tasks._scheduled_tasks could not be read");
    }
    if (const auto set = objects_.dict_get(globals, "_eager_tasks")) {
      add_registry(*set, false, true, order, found);
    }
  }
  if (const auto current = objects_.dict_get(globals, "_current_tasks")) {
    for (const auto& [loop, task] : objects_.dict_items(*current)) current_[loop] = task;
  }
}

bool AsyncTaskReader::add_task_list(std::uint64_t head, std::vector<std::uint64_t>& order,
                                    std::map<std::uint64_t, bool>& found) {
  std::set<std::uint64_t> seen;
  auto node = objects_.pointer_at(head);  // llist_node.next
  while (node && *node != head) {
    if (*node == 0 || !seen.insert(*node).second || !objects_.plausible(*node)) return false;
    if (order.size() >= options_.max_tasks) return true;
    const std::uint64_t task = *node - asyncio_->task_node;
    if (is_task(task) && found.emplace(task, false).second) order.push_back(task);
    node = objects_.pointer_at(*node);
  }
  return node.has_value();
}

void AsyncTaskReader::read_task_lists(const std::vector<std::uint64_t>& tstates,
                                      std::vector<std::uint64_t>& order,
                                      std::map<std::uint64_t, bool>& found, AsyncTasks& out) {
  const auto& a = *asyncio_;
  for (const std::uint64_t tstate : tstates) {
    if (!add_task_list(tstate + *a.tstate_tasks_head, order, found)) {
      out.notes.push_back("the asyncio task list of a thread state is broken: read in part");
    }
    const auto loop = running_loop(tstate);
    const auto task = objects_.read_field(tstate, *a.tstate_running_task);
    if (loop && task && *task != 0) current_[*loop] = *task;
  }
  if (!a.interp_tasks_head) return;  // without the table: noted with the layout
  const auto interp = objects_.read_field(runtime_, layout_.runtime_interpreters_head);
  if (!interp || !objects_.plausible(*interp) ||
      !add_task_list(*interp + *a.interp_tasks_head, order, found)) {
    out.notes.push_back("the interpreter's asyncio task list is broken: read in part");
  }
}

std::optional<AsyncTasks> AsyncTaskReader::read(const std::vector<std::uint64_t>& tstates,
                                                std::optional<std::uint64_t> module) {
  if (!module) module = find_tasks_module();
  if (!module) return std::nullopt;  // asyncio was never imported
  AsyncTasks out;
  if (!asyncio_) {
    out.notes.push_back("asyncio tasks of CPython " + layout_.version.to_string() +
                        " are not read (known: " + supported_versions() + ")");
    return out;
  }
  out.notes = layout_notes_;
  std::vector<std::uint64_t> order;
  std::map<std::uint64_t, bool> found;  // task → eager
  if (asyncio_->registry == TaskRegistry::kThreadLists) {
    read_task_lists(tstates, order, found, out);
  } else {
    const auto globals = objects_.plausible(*module)
                             ? objects_.read_field(*module, layout_.module_dict)
                             : std::nullopt;
    if (!globals || !objects_.plausible(*globals)) {
      out.notes.push_back("the module asyncio.tasks could not be read");
      return out;
    }
    read_registries(*globals, order, found, out);
  }
  if (order.size() >= options_.max_tasks) {
    out.notes.push_back("stopped after " + std::to_string(options_.max_tasks) + " tasks");
  }
  for (const std::uint64_t tstate : tstates) {
    if (const auto loop = running_loop(tstate)) out.loop_threads[*loop] = tstate;
  }
  out.tasks.reserve(order.size());
  for (const std::uint64_t task : order) {
    out.tasks.push_back(read_task(task));
    out.tasks.back().eager = found[task];
  }
  return out;
}

}  // namespace hangscope::python
