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

// The submission check of sbatch, salloc and srun. In Slurm 22.05 the return value of every
// SPANK callback of an `optional` plugin (the Debian package's, and the usual way to load one) is
// ignored (src/common/plugstack.c, _do_call_stack), except an option callback's: a non-zero
// return there makes sbatch, salloc and srun exit before anything is queued
// (src/common/slurm_opt.c → spank_process_option; src/*/opt.c _opt_env →
// spank_process_env_options), `optional` or `required`. So every refusal happens in an option
// callback:
//  - a --pipette* option whose value is invalid, given twice with different values, that
//    contradicts its PIPETTE_* variable, or (--pipette other than off) while plugstack.conf's
//    arguments are wrong;
//  - an invalid PIPETTE_* variable (or PIPETTE other than off with wrong plugstack arguments),
//    which no option callback would otherwise see: prepare_submission, run from slurm_spank_init
//    before Slurm reads options, logs it and sets the `--pipette` option's own environment
//    variable (spank(8): options may be given as SLURM_SPANK__SLURM_SPANK_OPTION_<plugin>_<name>,
//    read before the command line) to a marker whose callback refuses.
void prepare_submission(const std::string& config_error);

}  // namespace pipette::spank
