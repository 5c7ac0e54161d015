#pragma once
// Passing an error up in one line, as Dawn's DAWN_TRY does. Each macro evaluates a Result (or a
// Status) once; when it failed, the enclosing function returns its error, with a line of context
// added by the _CONTEXT forms (evaluated only on failure). Internal to the library: not
// installed, so that programs that include the forge's headers get no macros from it.
//
//   WF_TRY(device.write_buffer(buffer, 0, bytes));
//   WF_TRY_CONTEXT(cache.check_writable(), "storing " + name);
//   WF_TRY_ASSIGN(DispatchPlan plan, kernel.plan(schedule, problem, device));
//   WF_TRY_ASSIGN_CONTEXT(auto bound, prepared.bind(problem), "binding " + id);
//
// The _ASSIGN forms declare their variable in the enclosing scope (from the Result's value), so
// each needs a line of its own.

#include <utility>

#include "wgsl_forge/error.hpp"

#define WF_TRY_CONCAT_INNER(a, b) a##b
#define WF_TRY_CONCAT(a, b) WF_TRY_CONCAT_INNER(a, b)
#define WF_TRY_TEMPORARY WF_TRY_CONCAT(wf_try_result_, __LINE__)

#define WF_TRY(expression)                                       \
  do {                                                           \
    auto&& wf_try_result = (expression);                         \
    if (!wf_try_result) return std::move(wf_try_result).error(); \
  } while (false)

#define WF_TRY_CONTEXT(expression, context)                                            \
  do {                                                                                 \
    auto&& wf_try_result = (expression);                                               \
    if (!wf_try_result) return std::move(wf_try_result).error().with_context(context); \
  } while (false)

#define WF_TRY_ASSIGN(declaration, expression)                       \
  auto&& WF_TRY_TEMPORARY = (expression);                            \
  if (!WF_TRY_TEMPORARY) return std::move(WF_TRY_TEMPORARY).error(); \
  declaration = std::move(WF_TRY_TEMPORARY).value()

#define WF_TRY_ASSIGN_CONTEXT(declaration, expression, context)                            \
  auto&& WF_TRY_TEMPORARY = (expression);                                                  \
  if (!WF_TRY_TEMPORARY) return std::move(WF_TRY_TEMPORARY).error().with_context(context); \
  declaration = std::move(WF_TRY_TEMPORARY).value()
