{{ 'ranktable_model' | module_source }}
