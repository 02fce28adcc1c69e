/* A downstream program built against the installed moestream. Prints the
 * version and checks that opening a missing model fails with an I/O error
 * and a message naming the file. */
#include <moestream.h>

#include <stdio.h>
#include <string.h>

int main(void) {
    const char *missing = "/nonexistent/moestream-consumer/model.gguf";
    moestream_params params;
    moestream_context *ctx = NULL;
    int status;

    printf("%s\n", moestream_version_string());
    if (moestream_version_number() != MOESTREAM_VERSION_NUMBER) {
        fprintf(stderr, "header %s but library %s\n", MOESTREAM_VERSION_STRING, moestream_version_string());
        return 1;
    }
    moestream_params_init(&params);
    params.model_path = missing;
    status = moestream_open(&params, &ctx);
    if (status != MOESTREAM_ERR_IO || ctx != NULL) {
        fprintf(stderr, "moestream_open(missing) returned %d (%s); expected %d\n", status,
                moestream_status_string(status), MOESTREAM_ERR_IO);
        return 1;
    }
    if (!strstr(moestream_last_error(), missing)) {
        fprintf(stderr, "error message does not name the file: %s\n", moestream_last_error());
        return 1;
    }
    fprintf(stderr, "expected failure: %s\n", moestream_last_error());
    moestream_close(ctx);
    return 0;
}
