// This header moved to <stategraph/checkpoint/store/store.hpp>, the path that names its library; this one forwards to it so
// code written before the move still builds. It will be removed in 0.2: include the new path.
#pragma once
#include <stategraph/checkpoint/store/store.hpp>
