// The simulated nvidia-cuda-mps-server: what the simulated control daemon
// runs (found on its PATH, as the real daemon finds the real server) for
// each user's clients. It does no work: it waits while the daemon that
// started it lives, and a signal ends it. It links nothing of the product.
#include <unistd.h>

int main() {
  const pid_t daemon = ::getppid();
  while (::getppid() == daemon) ::usleep(100000);
  return 0;
}
