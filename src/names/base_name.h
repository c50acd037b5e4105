/* Base names of C++ functions for `cuptrace diff --group-by base`: the demangled name without
 * its template arguments, parameter list, return type and qualifiers, so that every
 * instantiation of one kernel template compares as one name:
 *
 *   void gemm<float, 128>(float*, int)            -> gemm
 *   gemm<float, 64>                               -> gemm
 *   void ns::(anonymous namespace)::k<4>(int)     -> ns::(anonymous namespace)::k
 *   std::ostream& ns::operator<< <T>(std::ostream&, T const&)  -> ns::operator<<
 *   void f<int>(int)::{lambda(float)#1}::operator()(float) const
 *                                                 -> f::{lambda(float)#1}::operator()
 *
 * A name that does not look like a C++ signature (no template arguments or parameter list right
 * after an identifier: "aten::add", "Memcpy HtoD (Pageable -> Device)", "nn.Module: Linear")
 * is its own base, and so is one whose brackets do not balance. Pure function of its input;
 * thread-safe. */
#ifndef CUPTRACE_NAMES_BASE_NAME_H
#define CUPTRACE_NAMES_BASE_NAME_H

#include <stddef.h>

/* Writes the base of name into out (NUL-terminated) and returns its length. The base is never
 * longer than name: with cap > strlen(name) it is never cut. */
size_t cuptrace_name_base(const char *name, char *out, size_t cap);

#endif
