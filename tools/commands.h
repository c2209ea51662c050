/* tools: the `tallow` CLI. One file per subcommand (cmd_<name>.c), each
 * exporting `int cmd_<name>(int argc, char **argv)` where argv[0] is the
 * subcommand name. Subcommands use only the public API (include/tallow.h)
 * except the model tools (inspect, quantize, convert, synth), which work on
 * files below the model level and use the io/quant layers directly.
 * Only the CLI prints usage and exits; return 0 on success, 1 on errors,
 * 2 on bad usage. */
#ifndef TL_TOOLS_COMMANDS_H
#define TL_TOOLS_COMMANDS_H

int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_lora(int argc, char **argv);
int cmd_finetune(int argc, char **argv);
int cmd_serve(int argc, char **argv);

#endif
