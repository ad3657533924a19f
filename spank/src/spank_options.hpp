#pragma once
// The options as Slurm sees them: registration with SPANK, the shared callback, and how each
// context reads the environment. Used by every context file.
#include <optional>
#include <string>

#include "options.hpp"
#include "slurm_api.hpp"

namespace pipette::spank {

// Registers every option with Slurm. Returns an empty string on success, else the error.
std::string register_options(spank_t sp);

// What the option callbacks recorded in this process, and the first error a remote callback
// could not report (remote callbacks never fail: a failed one would fail the step or drain).
const OptionRecorder& command_line_options();
const std::string& remote_option_error();

// One variable of the job's environment, remotely through spank_getenv; locally (srun, sbatch)
// the process's own.
std::optional<std::string> read_variable(spank_t sp, const char* name);

// The PIPETTE* option variables of that environment.
OptionValues environment_options(spank_t sp, std::string& error);

// Options that Slurm forwards to remote steps as SLURM_SPANK__SLURM_SPANK_OPTION_pipette_* job
// variables. With `sbatch --export=NONE` the batch step's callbacks never run, so the remote
// side reads them here as well; values agree with the callbacks' when both are present.
OptionValues forwarded_options(spank_t sp, std::string& error);

// The shared submission check of sbatch/salloc and srun: invalid values and command line vs
// environment conflicts are rejected (returns -1 after slurm_error), `site_error` only matters
// when the user asked for Pipette.
int validate_submission(spank_t sp, const std::string& config_error);

}  // namespace pipette::spank
