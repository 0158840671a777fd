/* libtorch's own code for the binding's tests only: it is built into
 * build/lib/libmgtorch_testing.so (Makefile), which nothing in the shipped
 * program links. */
#ifndef MICROGRAPH_TORCH_LIBTORCHTEST_H
#define MICROGRAPH_TORCH_LIBTORCHTEST_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One tensor of the file: its contiguous bytes on the host. */
typedef struct {
	char *name;
	int scalar_type; /* c10::ScalarType */
	int ndim;
	int64_t *shape;
	void *data;
	int64_t nbytes;
} mgt_entry;

/* Loads a torch.save zip with torch::pickle_load; the top object must be a
 * dict of str -> tensor. On success *entries (count of them, in the dict's
 * order) is for mgt_free_entries and NULL is returned; otherwise a message
 * allocated with malloc. */
char *mgt_pickle_load(const void *bytes, size_t size, mgt_entry **entries, int *count);
void mgt_free_entries(mgt_entry *entries, int count);

/* Turns libtorch's use of oneDNN on or off (at::globalContext's
 * userEnabledMkldnn, torch.backends.mkldnn.enabled) and returns the previous
 * setting. */
bool mgt_set_onednn(bool on);

#ifdef __cplusplus
}
#endif

#endif
