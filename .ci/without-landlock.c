/* without-landlock CMD ARGS...: runs CMD with the Landlock system calls
   failing with ENOSYS, as on a kernel built without Landlock (a Nix builder,
   say). .ci/run uses it to check that the nix-build nextest profile passes on
   such a kernel. x86_64 syscall numbers: 444 create_ruleset, 445 add_rule,
   446 restrict_self (the same on every architecture since Linux 5.13). */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s CMD [ARGS...]\n", argv[0]);
        return 2;
    }
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 444, 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 445, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 446, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
    };
    struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        perror("installing the seccomp filter");
        return 1;
    }
    execvp(argv[1], argv + 1);
    perror(argv[1]);
    return 127;
}
