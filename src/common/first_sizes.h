// The first released size of each public struct that starts with struct_size, from qd.h's
// QD_STRUCT_FIRST_SIZES table: first_size<T>() is what every struct_size check compares with
// (never sizeof(T), which grows when a field is appended).
#pragma once

#include <qd/qd.h>

#include <cstdint>

namespace qd {

template <class T>
struct FirstSize;

#define QD_FIRST_SIZE_(type, size, version)                                                        \
    template <>                                                                                    \
    struct FirstSize<type> {                                                                       \
        static constexpr uint32_t value = size;                                                    \
    };                                                                                             \
    static_assert(sizeof(type) >= (size), #type " is smaller than its first released size");
QD_STRUCT_FIRST_SIZES(QD_FIRST_SIZE_)
#undef QD_FIRST_SIZE_

template <class T>
constexpr uint32_t first_size() {
    return FirstSize<T>::value;
}

}  // namespace qd
