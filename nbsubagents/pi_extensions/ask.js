// Loaded by nbsubagents into a pi child that may ask (a preset's or a call's `ask: true`): the tool `ask` puts a
// question to the person in the notebook and returns the answer to the model.
//
// The question is one of pi's extension UI dialogs (`ctx.ui.select` with options, else `ctx.ui.input`). In RPC mode
// pi writes it as an `extension_ui_request` and waits for the `extension_ui_response`: the supervisor shows it to
// the notebook, relays the answer, and answers "cancelled" itself when nobody replies in time.
//
// The parameters are a plain JSON Schema object (no build step, no import): pi 0.73 and 1.x validate one as they
// validate a TypeBox schema.
// NBSUBAGENTS_NOBODY_TO_ASK: the run was started where nobody can answer (a script, a headless notebook, a Dask
// worker: question_timeout 0), so no person was asked at all.
const NO_ANSWER = process.env.NBSUBAGENTS_NOBODY_TO_ASK
  ? "No answer (nobody is there to answer questions in this run); go on with your best judgement."
  : "No answer (the person did not reply in time); go on with your best judgement.";

export default function (pi) {
  pi.registerTool({
    name: "ask",
    label: "Ask",
    description: "Ask the person in the notebook a question and wait for the answer",
    promptSnippet: "Ask the person in the notebook a question and wait for the answer",
    promptGuidelines: [
      "Use ask only when you cannot go on well without the person's decision or knowledge; give options when " +
        "the answer is one of a few choices.",
    ],
    parameters: {
      type: "object",
      properties: {
        question: { type: "string", description: "The question, short and self-contained" },
        options: {
          type: "array",
          items: { type: "string" },
          description: "The answers to choose from, when the answer is one of a few choices",
        },
      },
      required: ["question"],
      additionalProperties: false,
    },
    async execute(_toolCallId, params, signal, _onUpdate, ctx) {
      const question = String(params.question);
      const options = (params.options || []).filter((option) => typeof option === "string" && option.trim());
      const answer = options.length
        ? await ctx.ui.select(question, options, { signal })
        : await ctx.ui.input(question, undefined, { signal });
      const answered = typeof answer === "string";
      return {
        content: [{ type: "text", text: !answered ? NO_ANSWER : answer || "(an empty answer)" }],
        details: { question, options, answer: answered ? answer : null },
      };
    },
  });
}
