// InflightReport: which communication operations this process is waiting in, printed when the
// launcher ends the job with SIGTERM (or SIGINT), so a job torn down because another rank died
// or failed still says what every rank was waiting for.
#pragma once

#include <string>
#include <vector>

namespace braid::inflight {

// Records a pre-formatted line ("braid: rank 0: ... all_reduce(...) on group 'dp' ...");
// returns a slot for end(), or -1 when the table is full (the line is then not reported).
int begin(const std::string& line);
void end(int slot);
// The lines recorded now (without their newline), for tests.
std::vector<std::string> recorded();

// Installs the SIGTERM/SIGINT handler that writes the recorded lines to stderr and then
// re-raises the signal with its previous disposition. Called by World; restore() undoes it.
void install_signal_report();
void restore_signal_handlers();

}  // namespace braid::inflight
