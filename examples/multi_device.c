/* multi_device.c: several devices through qd, one context per device, ordered by qd events.
 *
 * Part 1 runs everywhere: two CPU contexts stand in for two devices. A stream of one waits on
 * an event of the other (qd_stream_wait_event across contexts), and data moves between them
 * with qd_memcpy_peer_async.
 *
 * Part 2 needs two CUDA GPUs and NCCL: one context and one qd stream per GPU, and an all-reduce
 * run by NCCL on the qd streams' native handles, ordered after the qd work that produced its
 * input and before the qd work that consumes its output, by qd events. NCCL is not a dependency
 * of qd: it is loaded at run time as libnccl.so.2 (PyTorch's wheels ship one, in
 * site-packages/nvidia/nccl/lib: put that directory on LD_LIBRARY_PATH). Without two GPUs or
 * NCCL, part 2 says why it was skipped.
 *
 *     cc -std=c99 multi_device.c $(pkg-config --cflags --libs qd) -ldl -o multi_device
 */
#include <qd/qd.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        qd_status status_ = (call);                                                                \
        if (status_ != QD_SUCCESS) {                                                               \
            fprintf(stderr, "%s:%d: %s: %s: %s\n", __FILE__, __LINE__, #call,                      \
                    qd_status_name(status_), qd_last_error_message());                             \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

enum { BYTES = 1 << 20, COUNT = BYTES / 4 };

/* ----------------------------------------------------------------------------------------- */
/* Part 1: two CPU contexts                                                                   */
/* ----------------------------------------------------------------------------------------- */

static void two_cpu_contexts(void) {
    qd_context_desc desc = QD_CONTEXT_DESC_INIT;
    qd_context a, b;
    qd_stream sa, sb;
    qd_event produced, copied;
    uint64_t buf_a, buf_b;
    uint32_t can = 0;
    unsigned char *out;
    int i, wrong = 0;

    desc.backend = QD_BACKEND_CPU;
    CHECK(qd_context_create(&desc, &a));
    CHECK(qd_context_create(&desc, &b));
    CHECK(qd_context_default_stream(a, &sa));
    CHECK(qd_context_default_stream(b, &sb));
    CHECK(qd_context_can_access_peer(b, a, &can));
    if (can) CHECK(qd_context_enable_peer_access(b, a));

    CHECK(qd_mem_alloc_async(sa, BYTES, &buf_a));
    CHECK(qd_mem_alloc_async(sb, BYTES, &buf_b));
    CHECK(qd_memset_async(sa, buf_a, 7, BYTES)); /* a produces */
    CHECK(qd_event_create(a, 0, &produced));
    CHECK(qd_event_record(sa, produced));
    CHECK(qd_stream_wait_event(sb, produced)); /* b waits for a's record: another context */
    CHECK(qd_memcpy_peer_async(sb, buf_b, b, buf_a, a, BYTES)); /* a's memory into b's */
    CHECK(qd_event_create(b, 0, &copied));
    CHECK(qd_event_record(sb, copied));
    CHECK(qd_stream_wait_event(sa, copied)); /* a frees its buffer only after b read it */
    CHECK(qd_mem_free_async(sa, buf_a));

    CHECK(qd_host_alloc(b, BYTES, (void **)&out));
    CHECK(qd_memcpy_async(sb, (uint64_t)(uintptr_t)out, buf_b, BYTES));
    CHECK(qd_stream_synchronize(sb));
    for (i = 0; i < BYTES; ++i) wrong += out[i] != 7;
    printf("cpu: peer copy between two contexts, ordered by a cross-context wait: %s\n",
           wrong ? "WRONG" : "ok");
    if (wrong) exit(1);
    CHECK(qd_host_free(b, out));
    CHECK(qd_mem_free_async(sb, buf_b));
    CHECK(qd_event_destroy(produced));
    CHECK(qd_event_destroy(copied));
    CHECK(qd_context_destroy(a));
    CHECK(qd_context_destroy(b));
}

/* ----------------------------------------------------------------------------------------- */
/* Part 2: two GPUs and NCCL                                                                  */
/* ----------------------------------------------------------------------------------------- */

/* What this program uses of nccl.h (NCCL 2.x ABI). */
typedef struct nccl_comm *nccl_comm_t;
typedef int nccl_result_t; /* ncclSuccess = 0 */
enum { NCCL_INT32 = 2, NCCL_SUM = 0 };
typedef struct nccl_api {
    nccl_result_t (*comm_init_all)(nccl_comm_t *comms, int ndev, const int *devlist);
    nccl_result_t (*all_reduce)(const void *send, void *recv, size_t count, int datatype, int op,
                                nccl_comm_t comm, void *stream);
    nccl_result_t (*group_start)(void);
    nccl_result_t (*group_end)(void);
    nccl_result_t (*comm_destroy)(nccl_comm_t comm);
    const char *(*error_string)(nccl_result_t result);
} nccl_api;

static int load_nccl(nccl_api *api, const char **why) {
    void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        *why = dlerror();
        return 0;
    }
    *(void **)&api->comm_init_all = dlsym(lib, "ncclCommInitAll");
    *(void **)&api->all_reduce = dlsym(lib, "ncclAllReduce");
    *(void **)&api->group_start = dlsym(lib, "ncclGroupStart");
    *(void **)&api->group_end = dlsym(lib, "ncclGroupEnd");
    *(void **)&api->comm_destroy = dlsym(lib, "ncclCommDestroy");
    *(void **)&api->error_string = dlsym(lib, "ncclGetErrorString");
    if (!api->comm_init_all || !api->all_reduce || !api->group_start || !api->group_end ||
        !api->comm_destroy || !api->error_string) {
        *why = "libnccl.so.2 lacks an entry this example needs";
        return 0;
    }
    return 1; /* kept loaded for the life of the process */
}

#define NCCL_CHECK(call)                                                                           \
    do {                                                                                           \
        nccl_result_t r_ = (call);                                                                 \
        if (r_ != 0) {                                                                             \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, nccl.error_string(r_));  \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void two_gpus_and_nccl(void) {
    uint32_t devices = 0;
    nccl_api nccl;
    const char *why = NULL;
    qd_context ctx[2];
    qd_stream work[2], comm_stream[2];
    qd_event produced[2], reduced[2];
    uint64_t in[2], out[2], native[2];
    nccl_comm_t comms[2];
    int devlist[2] = {0, 1}, d, i, wrong = 0;
    int32_t *host[2];

    if (qd_device_count(QD_BACKEND_CUDA, &devices) != QD_SUCCESS) {
        printf("cuda: skipped: %s\n", qd_last_error_message());
        return;
    }
    if (devices < 2) {
        printf("cuda: skipped: needs 2 GPUs (this machine has %u)\n", devices);
        return;
    }
    if (!load_nccl(&nccl, &why)) {
        printf("cuda: skipped: NCCL not loadable: %s\n", why);
        return;
    }
    for (d = 0; d < 2; ++d) {
        qd_context_desc desc = QD_CONTEXT_DESC_INIT;
        desc.backend = QD_BACKEND_CUDA;
        desc.device = (uint32_t)d;
        CHECK(qd_context_create(&desc, &ctx[d]));
        CHECK(qd_stream_create(ctx[d], NULL, &work[d]));
        CHECK(qd_stream_create(ctx[d], NULL, &comm_stream[d]));
        CHECK(qd_stream_native_handle(comm_stream[d], &native[d]));
        CHECK(qd_event_create(ctx[d], 0, &produced[d]));
        CHECK(qd_event_create(ctx[d], 0, &reduced[d]));
        CHECK(qd_host_alloc(ctx[d], BYTES, (void **)&host[d]));
    }
    NCCL_CHECK(nccl.comm_init_all(comms, 2, devlist));

    /* Produce on each GPU with qd (bytes of d+1: each int32 is 0x01010101 * (d+1)). */
    for (d = 0; d < 2; ++d) {
        CHECK(qd_mem_alloc_async(work[d], BYTES, &in[d]));
        CHECK(qd_mem_alloc_async(work[d], BYTES, &out[d]));
        CHECK(qd_memset_async(work[d], in[d], (uint8_t)(d + 1), BYTES));
        CHECK(qd_event_record(work[d], produced[d]));
        CHECK(qd_stream_wait_event(comm_stream[d], produced[d])); /* NCCL after the producer */
    }
    /* The all-reduce, on the qd streams' native handles. */
    NCCL_CHECK(nccl.group_start());
    for (d = 0; d < 2; ++d)
        NCCL_CHECK(nccl.all_reduce((const void *)(uintptr_t)in[d], (void *)(uintptr_t)out[d], COUNT,
                                   NCCL_INT32, NCCL_SUM, comms[d], (void *)(uintptr_t)native[d]));
    NCCL_CHECK(nccl.group_end());
    /* Consume on each GPU with qd, after the all-reduce: a copy to pinned host memory. */
    for (d = 0; d < 2; ++d) {
        CHECK(qd_event_record(comm_stream[d], reduced[d]));
        CHECK(qd_stream_wait_event(work[d], reduced[d]));
        CHECK(qd_memcpy_async(work[d], (uint64_t)(uintptr_t)host[d], out[d], BYTES));
    }
    for (d = 0; d < 2; ++d) {
        CHECK(qd_stream_synchronize(work[d]));
        for (i = 0; i < COUNT; ++i) wrong += host[d][i] != 0x03030303;
    }
    printf("cuda: NCCL all-reduce of %d int32 on qd streams of 2 GPUs: %s\n", COUNT,
           wrong ? "WRONG" : "ok");
    for (d = 0; d < 2; ++d) {
        NCCL_CHECK(nccl.comm_destroy(comms[d]));
        CHECK(qd_mem_free_async(work[d], in[d]));
        CHECK(qd_mem_free_async(work[d], out[d]));
        CHECK(qd_host_free(ctx[d], host[d]));
        CHECK(qd_context_destroy(ctx[d]));
    }
    if (wrong) exit(1);
}

int main(void) {
    two_cpu_contexts();
    two_gpus_and_nccl();
    return 0;
}
