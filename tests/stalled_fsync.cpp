// LD_PRELOAD shim for the test of a file system that stalls: fsync sleeps for 10 minutes, as a call on a
// network mount whose server went away blocks. A program that writes a file (write_file_atomically) must
// end itself at its limit, with exit 3 and a message naming the file, not wait.
#include <unistd.h>

extern "C" int fsync(int) {
    sleep(600);
    return 0;
}
