// The publish answers for the last few addresses a thread checked under one rule: a supplier
// that mixes a handful of addresses is answered by a memcmp instead of its rule's patterns.
#pragma once

#include "suppliers/address_memo.hpp"

namespace gatewayd::suppliers {

// true = permitted. The caller forgets the memo whenever the rule it answers for changes
// (another supplier's pass, another table).
using permission_memo = address_memo<bool>;

}  // namespace gatewayd::suppliers
