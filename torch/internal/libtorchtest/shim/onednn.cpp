// libtorch's oneDNN switch (testing.h), for the tests that run on any CPU the
// products a CPU without avx512 instructions computes.
#include <ATen/Context.h>

#include "testing.h"

bool mgt_set_onednn(bool on) {
	const bool was = at::globalContext().userEnabledMkldnn();
	at::globalContext().setUserEnabledMkldnn(on);
	return was;
}
