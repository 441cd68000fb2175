// Test helper: the message of the exception a call throws, for comparing
// error messages exactly.
#pragma once

#include <exception>
#include <functional>
#include <string>

namespace pipeplan::test {

/// What `fn` throws as an E, or "<no error>" when it returns; an exception
/// of another type propagates (and fails the test).
template <class E = std::exception>
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace pipeplan::test
