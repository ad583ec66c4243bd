/* The default model (models/stories260K.gguf) linked into the binary as read-only data. */
        .section .rodata
        .balign 64
        .global tessera_embedded_model_begin
        .global tessera_embedded_model_end
tessera_embedded_model_begin:
        .incbin TESSERA_EMBEDDED_MODEL_PATH
tessera_embedded_model_end:
        .byte 0
        .section .note.GNU-stack,"",@progbits
